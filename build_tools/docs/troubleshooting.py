"""The troubleshooting tables (docs/troubleshooting.md) and the README's index of them,
printed by the guard itself.

Each row is a recorded situation (build facts, this process, library files,
the loader's own words, GPUs) passed through the policy's `evaluate`; the
table shows the finding exactly as the guard prints it, with its fix commands.
So the docs cannot say what the guard does not. `python -m build_tools.docs.readme`
writes them.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from build_tools.compat import dlerror, facts, policy, probes, record, torch_internals
from build_tools.plan import matrix

SITE = "/venv/lib/python3.12/site-packages/wheelops"
CPU_FILE = f"{SITE}/_ops_cpu.abi3.so"
CUDA13 = facts.CudaLibraryInfo(
    file="_ops_cuda13.abi3.so",
    cuda_version="13.0",
    nvcc_version="13.0.88",
    toolkit_origin="PyPI",
    arch_list="7.5;8.0;9.0;10.0;12.0+PTX",
    sass_archs=("7.5", "8.0", "9.0", "10.0", "12.0"),
    ptx_archs=("12.0",),
    cublaslt_version="13.1.1",
)
CUDA12 = facts.CudaLibraryInfo(
    file="_ops_cuda12.abi3.so",
    cuda_version="12.4",
    nvcc_version="12.4.131",
    toolkit_origin="Debian trixie nvidia-cuda-toolkit 12.4.131~12.4.1-2",
    arch_list="7.0;8.0;9.0+PTX",
    sass_archs=("7.0", "8.0", "9.0"),
    ptx_archs=("9.0",),
    cublaslt_version="12.4.5",
)
BUILD = facts.BuildInfo(
    wheelops_version="0.1.0",
    torch_version="2.14.1+cu130",
    stable_abi_floor="2.10",
    python_floor="3.10",
    compiler="c++ (GCC) 14.2.1",
    platform="linux_x86_64",
    git_commit="0" * 40,
    cpu_library="_ops_cpu.abi3.so",
    cuda_libraries=(CUDA13,),
    built_as="cu130",
)
CPU_BUILD = replace(BUILD, cuda_libraries=(), built_as="cpu")
UNIVERSAL = replace(BUILD, cuda_libraries=(CUDA12, CUDA13), built_as="universal")
HERE = facts.RuntimeFacts("3.12.3", "x86_64", "2.14.1+cu130", "13.0", None, None)


def _torch(version: str, cuda: str | None = None, **other: Any) -> Any:
    return replace(HERE, torch_version=version, torch_cuda=cuda, **other)


def _path(role: str) -> str:
    return CPU_FILE if role == "cpu" else f"{SITE}/_ops_{role}.abi3.so"


def _file(role: str, problem: str | None = None, exists: bool = True) -> Any:
    path = _path(role) if exists or role != "cpu" else f"{SITE}/_ops_cpu*.so"
    return policy.LibraryFile(role, path, exists, problem)


def _loader_said(role: str, text: str, build: Any = BUILD, runtime: Any = HERE) -> dict[str, Any]:
    path = Path(_path(role))
    library = next((lib for lib in build.cuda_libraries if f"cuda{lib.major}" == role), None)
    failure = dlerror.classify(
        path,
        text.format(path=path),
        build_torch=build.torch_version,
        runtime_torch=runtime.torch_version,
        build_cuda=library.cuda_version if library else None,
        runtime_cuda=runtime.torch_cuda,
    )
    return {role: failure}


@dataclass(frozen=True)
class Situation:
    meaning: str
    build: Any = BUILD
    runtime: Any = HERE
    files: tuple[Any, ...] = (_file("cpu"), _file("cuda13"))
    load_failures: dict[str, Any] = field(default_factory=dict)
    gpus: tuple[Any, ...] | None = None
    driver: str | None = "13.0"
    check: str | None = None  # the finding to show; else the first that is not ok
    cuda_override: int | None = None
    damaged_files: tuple[Any, ...] | None = None
    other_installs: tuple[str, ...] = ()
    nvidia_wheels: tuple[str, ...] | None = None
    changed_libraries: dict[str, str] = field(default_factory=dict)
    installed_version: str | None = "0.1.0+cu130"  # METADATA's: the recorded cu130 wheel
    compilers: tuple[Any, ...] | None = None
    autograd: Any = None  # torch_internals.AutogradFacts: the probe of the autograd layer


AT_IMPORT = [
    Situation("the interpreter is too old", runtime=replace(HERE, python_version="3.9.18")),
    Situation("installed with `--no-deps` and no torch", runtime=_torch(None), check="torch"),
    Situation("no wheelops build loads in that torch", runtime=_torch("2.9.1+cu128", "12.8")),
    Situation(
        "the wheel's CUDA major differs from torch's", runtime=_torch("2.10.0+cu128", "12.8")
    ),
    Situation(
        "torch's CUDA runtime is older than the build's toolkit",
        build=replace(BUILD, cuda_libraries=(replace(CUDA13, cuda_version="13.2"),)),
    ),
    Situation(
        "no published variant loads beside that torch",
        runtime=_torch("2.10.0+cu124", "12.4"),
    ),
    Situation("a wheel for another CPU", build=replace(BUILD, platform="linux_aarch64")),
    Situation(
        "the package is incomplete",
        files=(_file("cpu"), _file("cuda13", exists=False)),
    ),
    Situation(
        "a damaged library (loading it could kill the process with SIGBUS)",
        files=(
            _file("cpu", f"{CPU_FILE} is truncated: 1048576 bytes, its headers describe 9437184"),
            _file("cuda13"),
        ),
    ),
    Situation(
        "a library for another CPU (the loader itself would say 'No such file or directory')",
        files=(_file("cpu", f"{CPU_FILE} was built for aarch64; this machine is x86_64"),),
    ),
    Situation(
        "another file in the library's place (a sibling wheelops library, another build) or "
        "bytes changed inside it: import reads each library it loads back against the sha256 "
        "its build recorded in the build facts first, with or without the wheel's RECORD "
        "(loading it could abort the process)",
        changed_libraries={
            "cpu": "changed (its sha256 differs from the sha256 its build recorded)"
        },
    ),
    Situation(
        "`WHEELOPS_CUDA_LIBRARY` set to something other than 12 or 13",
        build=UNIVERSAL,
        files=(_file("cpu"), _file("cuda12"), _file("cuda13")),
        cuda_override="0",
        installed_version="0.1.0",
    ),
    Situation(
        "`WHEELOPS_CUDA_LIBRARY=12` where the CUDA 12 runtime is not on the loader's path",
        build=UNIVERSAL,
        files=(_file("cpu"), _file("cuda12"), _file("cuda13")),
        cuda_override="12",
        installed_version="0.1.0",
        load_failures=_loader_said(
            "cuda12",
            "libcudart.so.12: cannot open shared object file: No such file or directory",
            build=UNIVERSAL,
        ),
        check="load CUDA 12 library",
    ),
    Situation(
        "a 32-bit library",
        files=(_file("cpu", f"{CPU_FILE} is a 32-bit library; this Python is 64-bit"),),
    ),
    Situation(
        "`_build_info.json` is missing",
        build=facts.UnreadableBuildInfo(f"{SITE}/_build_info.json", "missing", False),
    ),
    Situation(
        "`_build_info.json` is damaged",
        build=facts.UnreadableBuildInfo(
            f"{SITE}/_build_info.json",
            "unreadable (JSONDecodeError: Expecting value: line 1 column 1 (char 0))",
            False,
        ),
    ),
    Situation(
        "a library built the classic (unstable-ABI) way, or for another torch",
        load_failures=_loader_said(
            "cpu", "{path}: undefined symbol: _ZN3c106detail23torchInternalAssertFailEPKcS2_jS2_"
        ),
    ),
    Situation(
        "torch is older than the build needs",
        load_failures=_loader_said("cpu", "{path}: undefined symbol: aoti_torch_new_function"),
    ),
    Situation(
        "a library of another CUDA major",
        load_failures=_loader_said(
            "cuda13", "libcudart.so.12: cannot open shared object file: No such file or directory"
        ),
    ),
    Situation(
        "the runtime lacks a function of the build's toolkit",
        load_failures=_loader_said(
            "cuda13", "{path}: undefined symbol: cudaGetDriverEntryPointByVersion"
        ),
    ),
    Situation(
        "an old system libstdc++ (often a conda environment's)",
        load_failures=_loader_said(
            "cpu",
            "/opt/conda/lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found "
            "(required by {path})",
        ),
    ),
    Situation(
        "an OS older than the wheel's manylinux_2_28",
        load_failures=_loader_said(
            "cpu", "/lib64/libc.so.6: version `GLIBC_2.28' not found (required by {path})"
        ),
    ),
    Situation(
        "torch is broken, or the library was loaded without torch",
        load_failures=_loader_said(
            "cpu", "libtorch_cpu.so: cannot open shared object file: No such file or directory"
        ),
    ),
    Situation(
        "another dependency is missing",
        load_failures=_loader_said(
            "cpu", "libfoo.so.1: cannot open shared object file: No such file or directory"
        ),
    ),
    Situation(
        "a damaged copy of a dependency, found on LD_LIBRARY_PATH or in the system's library "
        "directories before torch's own",
        load_failures=_loader_said("cuda13", "/opt/broken/libcudart.so.13: file too short"),
    ),
    Situation(
        "a case the guard does not know: the loader's own words follow",
        load_failures=_loader_said("cpu", "{path}: cannot enable executable stack"),
    ),
]
IN_THE_REPORT = [
    Situation("a CPU-only torch: CPU tensors work", runtime=_torch("2.13.0+cpu")),
    Situation("a ROCm torch: CPU tensors work", runtime=_torch("2.11.0+rocm6.4", torch_hip="6.4")),
    Situation("the cpu variant under a CUDA torch", build=CPU_BUILD, files=(_file("cpu"),)),
    Situation("no NVIDIA driver: CPU tensors work", gpus=(), driver=None, check="CUDA driver"),
    Situation("the driver is too old for torch's CUDA", gpus=(), driver="12.8"),
    Situation(
        "the aarch64 wheel on a Jetson with L4T before JetPack 7 (integrated GPU, another "
        "CUDA platform): CPU tensors work",
        build=replace(UNIVERSAL, platform="linux_aarch64"),
        runtime=replace(HERE, machine="aarch64", l4t="R36 (release), REVISION: 4.3"),
        check="platform",
    ),
    Situation(
        "a GPU the build has no kernel for: its first op raises UnsupportedGPUError",
        build=replace(
            BUILD,
            cuda_libraries=(replace(CUDA13, sass_archs=("8.0",), ptx_archs=(), arch_list="8.0"),),
        ),
        gpus=(probes.Gpu(0, "NVIDIA H100 80GB HBM3", (9, 0)),),
    ),
]
IN_THE_REPORT += [
    Situation(
        "a file of the install differs from the wheel (the doctor reads each back against "
        "RECORD; import reads only the libraries it loads)",
        damaged_files=(
            record.FileDamage(
                f"{SITE}/nn/softmax.py", "changed (its sha256 differs from the wheel's RECORD)"
            ),
        ),
        check="installed files",
    ),
    Situation(
        "torch's run-time compiler ($CXX, else g++) links libstdc++ statically: AOTInductor "
        "packages it builds crash when loaded (the GPU machine's /opt/gcc wrapper)",
        compilers=(
            probes.CompilerProbe(
                "/opt/gcc/bin/g++",
                "/opt/gcc/bin/g++",
                "private",
                "the C++ exception runtime (libstdc++ / libsupc++)",
            ),
            probes.CompilerProbe("/usr/bin/g++", "/usr/bin/g++", "shared"),
        ),
        check="C++ compiler",
    ),
    Situation(
        "two wheelops on sys.path: the first is imported",
        other_installs=(f"{SITE} (installed (wheelops-0.1.0+cu130))",),
        check="other wheelops",
    ),
    Situation(
        "NVIDIA wheels of the CUDA major torch no longer uses, left behind where torch was "
        "replaced (`pip install wheelops` into an older torch: README, Install)",
        nvidia_wheels=(
            "nvidia-cublas",
            "nvidia-cublas-cu12",
            "nvidia-cuda-runtime",
            "nvidia-cuda-runtime-cu12",
            "nvidia-cudnn-cu13",
        ),
        check="NVIDIA wheels",
    ),
]
IN_THE_REPORT += [
    Situation(
        "a torch that renamed an internal the fast autograd layer uses: the ops' derivatives "
        "run on public APIs (docs/ops.md: Derivatives)",
        autograd=torch_internals.AutogradFacts(
            "2.16.0", ("torch.autograd.function._SingleLevelFunction",), None
        ),
        check="autograd",
    ),
    Situation(
        "the public-API autograd layer, asked for (to test it, or to rule the fast one out)",
        autograd=torch_internals.AutogradFacts("2.14.1+cu130", (), torch_internals.PUBLIC),
        check="autograd",
    ),
    Situation(
        "the optional C++ autograd accelerator turned off (to rule it out)",
        autograd=torch_internals.AutogradFacts("2.14.1+cu130", (), None, "off (WHEELOPS_ACCEL=0)"),
        check="accelerator",
    ),
    Situation(
        "a damaged accelerator library (the wheel's for this torch): refused on load",
        autograd=torch_internals.AutogradFacts(
            "2.14.1+cu130",
            (),
            None,
            "refused (ImportError: .../wheelops/_accel/torch2_14_1/wheelops_accel.abi3.so: "
            "invalid ELF header): the stable-ABI autograd layer serves",
        ),
        check="accelerator",
    ),
]
UNIVERSAL_FILES = (_file("cpu"), _file("cuda12"), _file("cuda13"))
IN_THE_REPORT.append(
    Situation(
        "an expert's override (the doctor says it is on): the CUDA 12 library under a CUDA 13 "
        "torch",
        build=UNIVERSAL,
        files=UNIVERSAL_FILES,
        cuda_override=12,
    )
)
IN_A_CHECKOUT = [
    Situation(
        "nothing is built: build in place, or install a wheel",
        build=facts.UnreadableBuildInfo(f"{SITE}/_build_info.json", "missing", True),
        files=(),
    ),
]


def finding(situation: Situation) -> Any:
    published = matrix.matrix()
    published = dataclasses.replace(
        published, index_url=published.published_index_url, mirrored=False
    )
    inputs = policy.Inputs(
        situation.build,
        files=situation.files,
        load_failures=situation.load_failures,
        cuda_override=situation.cuda_override,
        changed_libraries=situation.changed_libraries,
        installed_version=situation.installed_version,
        gpus=situation.gpus,
        driver=situation.driver,
        damaged_files=situation.damaged_files,
        other_installs=situation.other_installs,
        nvidia_wheels=situation.nvidia_wheels,
        compilers=situation.compilers,
        autograd=situation.autograd,
    )
    report = policy.evaluate(inputs, situation.runtime, published)
    if situation.check:
        return report.finding(situation.check)
    return next(f for f in report.findings if f.status is not policy.Status.OK)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(situations: list[Situation]) -> str:
    rows = [
        "| the guard prints | status | fix (commands; keeping your torch first) | meaning |",
        "|---|---|---|---|",
    ]
    for situation in situations:
        f = finding(situation)
        fix = "<br>".join(f"`{_cell(c)}`" for c in f.fix) or "(none: see the message)"
        rows.append(
            f"| `{_cell(f.check)}: {_cell(f.message)}` | {f.status} | {fix} | {situation.meaning} |"
        )
    return "\n".join(rows)


# Each table's heading: where the guard reports these findings, and what that means.
GROUPS = (
    ("At import", "`wheelops.CompatibilityError`; `python -m wheelops` exits 1", AT_IMPORT),
    (
        "In the doctor's report",
        "degraded: `import wheelops` works, `python -m wheelops` exits 0",
        IN_THE_REPORT,
    ),
    (
        "In a source checkout with nothing built",
        "`import wheelops` works, so that `PYTHONPATH=src python -m build_tools.dev` can build; "
        "the ops raise until then; `python -m wheelops` exits 1",
        IN_A_CHECKOUT,
    ),
)


def render() -> str:
    return "\n\n".join(
        f"### {title}\n\n{how}.\n\n{table(situations)}" for title, how, situations in GROUPS
    )


def index(page: str) -> str:
    """One item per table of ``page`` (where render() is), linked to it, and under it each
    check its messages start with (`<check>: ...`) and what its rows mean, shortened."""
    lines = []
    for title, how, situations in GROUPS:
        anchor = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")  # as GitHub's
        meanings: dict[str, list[str]] = {}
        for situation in situations:
            short = re.sub(r" \([^)]*\)", "", situation.meaning).split(": ")[0]
            meanings.setdefault(finding(situation).check, []).append(short)
        lines.append(f"- [{title}]({page}#{anchor}) ({how}):")
        lines += [f"  - `{check}`: {'; '.join(m)}" for check, m in meanings.items()]
    return "\n".join(lines)
