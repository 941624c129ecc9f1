"""One step of the matrix each, run through a nox session: build a target's wheel, repair
it, install and test it in a fresh venv (or an emulated one), serve the index and install
from it. noxfile.py's sessions and the e2e rows (rows.py) are made of these.

Variants, toolkits, arch lists, images and torch versions come from src/wheelops/matrix.json
through build_tools/plan/matrix.py; nothing here repeats them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from build_tools import ROOT
from build_tools.compile.build_facts import git_commit
from build_tools.package import index, sbom, wheel_files
from build_tools.package.repair import ABI_AUDIT_REQUIREMENT
from build_tools.plan import installer
from build_tools.plan import matrix as build_matrix
from build_tools.plan.cuda_toolkit import CUOBJDUMP_REQUIREMENT

if TYPE_CHECKING:
    from nox import Session

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
TEST_REQUIREMENTS = [
    "pytest>=8",
    "pytest-xdist>=3.5",  # one worker per core: the suite waits on subprocesses a lot
    "expecttest",
    "numpy",
    "hypothesis>=6.100",
    # The suite also builds the sources in dev mode, whose builder reads torch's include
    # and library paths from torch.utils.cpp_extension, which imports setuptools.
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
# The CPU tests the emulated runs take (qemu-user: each test process imports torch in tens
# of seconds, a test runs tens of times slower). Under every torch of the platform, what
# differs by torch: the build facts, links and the library the loader chose (test_build), the
# first-lookup hook (test_first_lookup: in-process, a tenth of a second). Under its first
# torch also the CPU library's ops, the same library under each torch: every op's default
# call against eager forward and backward (test_op_catalog) and two ops' whole specs
# (test_add, test_silu_and_mul): at least 100 op tests (tests/test_cross_build.py counts them).
# `nox -s emulated -- ... --all` runs the whole suite.
EMULATED_LOADING = ("tests/test_build.py", "tests/test_first_lookup.py")
EMULATED_SUBSET = (
    *EMULATED_LOADING,
    "tests/test_op_catalog.py",
    "tests/test_add.py",
    "tests/test_silu_and_mul.py",
)


def emulated_tests(torch: str, torches: list[str]) -> tuple[str, ...]:
    """The emulated subset under a platform's first torch, its loading tests under the rest."""
    return EMULATED_SUBSET if torch == torches[0] else EMULATED_LOADING


def emulated_torches(torches: tuple[str, ...], quick: bool) -> list[str]:
    """The torches a cross row's emulated cells run (e2e): each the platform is tested with;
    a quick row (CI) its newest only, whose CUDA build loads the wheel's CUDA library under
    emulation, with the CPU subset (the floor's CPU-only aarch64 torch: `nox -s emulated`).
    Each emulated cell costs minutes: qemu imports torch in about a minute a process."""
    return list(torches[-1:] if quick else torches)


# Each op's bound-soundness test at the GPU's largest shape (4096 x 4096, with its float64
# reference and the bound's tightness passes: 12-18 s per dtype in CI's cells here, 1.5
# minutes under qemu; four dtypes per op).
NOT_LARGEST_SHAPE_BOUNDS = "not test_bound_passes_the_correctly_rounded"
# Less the tests marked slow (torch.compile: inductor would need an aarch64 C++ compiler in
# the emulated machine) and the largest-shape bound tests; the tests' own shapes check the
# same bound on the emulated kernels.
EMULATED_SUBSET_SELECT = ("-m", "not gpu and not slow", "-k", NOT_LARGEST_SHAPE_BOUNDS)
EMULATED_TEST_REQUIREMENTS = ["pytest>=8", "expecttest", "numpy", "hypothesis>=6.100"]
# The installed wheel's tests find the guard's fix commands' index of these wheels.
# OMP_WAIT_POLICY: each pytest-xdist worker (one per core) runs torch's intra-op pool of a
# thread per core, and libgomp's idle threads spin by default: on 2 cores they took the
# core the other worker needed. Passive, they sleep; the pool and its parallel paths stay
# as they are. Measured on the shared 2-core machine: the 2**28-element check alone 65 ->
# 14 CPU s; test_add + test_relu_scale under 2 workers 135 -> 104 s wall; the suite less
# its slow tests 589 -> 404 CPU s (its wall, 323 vs 357 s under other loads, not shorter).
INSTALLED_ENV = {
    "WHEELOPS_TEST_INSTALLED": "1",
    "WHEELOPS_TEST_WHEELHOUSE": str(REPAIRED),
    "OMP_WAIT_POLICY": "PASSIVE",
}
PYTEST_QUIET = ("-ra", "-q", "-p", "no:cacheprovider")


def variant_args(session: Session, default: list[str]) -> argparse.Namespace:
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


def local_default_variant() -> str:
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


def session_variants(session: Session) -> argparse.Namespace:
    """The session's arguments: targets (default: this machine's best), --arch-list, --quick."""
    return variant_args(session, [local_default_variant()])


@contextlib.contextmanager
def outside_checkout(session: Session) -> Iterator[None]:
    """Run in a temporary directory, and back in the checkout even if a command
    fails (e2e goes on to the next cell after a failed one)."""
    with tempfile.TemporaryDirectory() as cwd:
        session.chdir(cwd)
        try:
            yield
        finally:
            session.chdir(ROOT)


def _python(venv: Path | None) -> str:
    return str(venv / "bin" / "python") if venv else "python"


def pip(session: Session, venv: Path | None, *args: str) -> None:
    session.run(_python(venv), "-m", "pip", "install", *args, external=venv is not None)


def with_uv(session: Session) -> dict[str, str]:
    """The environment in which build_tools installs with uv (build_tools/plan/installer.py:
    a CUDA torch in a third of pip's time), installing uv into the session first."""
    uv = Path(session.bin) / "uv"
    if not uv.exists():
        session.install(UV)
    return {installer.UV_ENV: str(uv)}


def install_requirements(session: Session, venv: Path, *requirements: str) -> None:
    session.chdir(ROOT)  # build_tools runs one way: python -m, from the checkout's root
    command = ["-m", "build_tools.plan.installer", *requirements]
    session.run(_python(venv), *command, env=with_uv(session), external=True)


def install_torch(session: Session, venv: Path | None, variant: str, torch: str) -> None:
    """Install the cell's torch and check it is that one (build_tools/plan/torch_install.py)."""
    session.chdir(ROOT)
    command = ["-m", "build_tools.plan.torch_install", variant, torch]
    session.run(_python(venv), *command, env=with_uv(session), external=venv is not None)


def build_wheel(session: Session, name: str, arch_list: str | None) -> Path:
    """The wheel of a variant (for this machine) or VARIANT-PLATFORM (cross-built) in
    dist/<name>/."""
    variant, platform = TARGETS[name]
    # The same preparation as cibuildwheel's before-build: torch + the exact toolkit.
    session.run("python", "-m", "build_tools.plan.build_env", variant.name, env=with_uv(session))
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
        left_out = (".nox", "build", "dist", "site", ".git", "*.so")
        shutil.copytree(ROOT, staged, ignore=shutil.ignore_patterns(*left_out))
        wheel_command = ["pip", "wheel", "--no-build-isolation", "--no-deps"]
        session.run(*wheel_command, "-w", str(out_dir), str(staged), env=env)
    (wheel,) = out_dir.glob("wheelops-*.whl")
    wanted = [MATRIX.variant(part).cuda for part in variant.parts] or [variant.cuda]
    problem = wheel_files.built_problem(wheel, variant.name, platform, wanted)
    if problem:
        session.error(problem)
    session.log(f"built {wheel.name}: {wheel_files.libraries_said(wheel)}")
    session.log("\n" + wheel_files.size_table(wheel))
    return wheel


def repair(session: Session, name: str) -> Path:
    wheels = sorted((DIST / name).glob("wheelops-*.whl"))
    if not wheels:
        session.error(f"no wheel in dist/{name}: run `nox -s build -- {name}` first")
    # cuobjdump: build_tools/package/native_check.py reads each CUDA library's SASS and PTX.
    requirements = ROOT / "build_tools" / "package" / "repair-requirements.txt"
    session.install("-r", str(requirements), CUOBJDUMP_REQUIREMENT)
    dest = REPAIRED / name
    shutil.rmtree(dest, ignore_errors=True)
    plat = MATRIX.manylinux_tag(TARGETS[name][1])
    session.run(
        "python", "-m", "build_tools.package.repair", str(wheels[0]), str(dest), "--plat", plat
    )
    (repaired,) = dest.glob("*.whl")
    return repaired


def new_venv(session: Session, where: Path) -> Path:
    session.run(sys.executable, "-m", "venv", "--clear", str(where), external=True, silent=True)
    return where


def installed_wheel(variant: str) -> Path:
    wheels = sorted((REPAIRED / variant).glob("wheelops-*.whl"))
    if not wheels:
        raise FileNotFoundError(f"no repaired wheel in dist/repaired/{variant}")
    return wheels[0]


def test_wheel(
    session: Session,
    variant: str,
    torch: str,
    venv: Path,
    tests: tuple[str, ...] = ("tests",),
    env: dict[str, str] | None = None,
    dist: str = "loadfile",
    slow: bool = True,
    keyword: str | None = None,
) -> None:
    """Install the repaired wheel (not the source tree) with that torch; run the suite
    (or the named test files), one pytest-xdist worker per core. `dist` "loadfile" keeps
    a file's tests on one worker, so that its module fixtures (a venv and index, a copy of
    the install) are made once. `slow` False: without the tests marked slow. `keyword`:
    pytest's -k expression."""
    install_torch(session, venv, variant, torch)
    install_requirements(session, venv, *TEST_REQUIREMENTS)
    pip(session, venv, "--no-deps", "--force-reinstall", str(installed_wheel(variant)))
    gpu_free = torch.endswith("+cpu")
    markers = [*(["not gpu"] if gpu_free else []), *([] if slow else ["not slow"])]
    workers = ("-n", "auto", "--dist", dist, "--durations=15")
    selected = ["-m", " and ".join(markers)] if markers else []
    selected += ["-k", keyword] if keyword else []
    # Outside the checkout, so that `import wheelops` cannot find the source tree.
    with outside_checkout(session):
        session.run(
            _python(venv),
            *("-m", "pytest", *(str(ROOT / t) for t in tests), *PYTEST_QUIET),
            *workers,
            *selected,
            env={**INSTALLED_ENV, **(env or {})},
            external=True,
        )


def emulated_venv(session: Session, platform: str, torch: str, where: Path, *install: str) -> Path:
    """A fresh venv of an emulated CPython for `platform` with that PyPI torch, and
    `install` (emulation.py's options: --wheel W, --index-url U, --with REQ...)."""
    session.chdir(ROOT)
    command = ["-m", "build_tools.package.emulation", "venv", platform, str(where)]
    session.run("python", *command, "--torch", torch, *install, env=with_uv(session))
    return where / "bin" / "python"


def test_emulated(
    session: Session, target: str, torch: str, tests: tuple[str, ...], venv: Path
) -> None:
    """The repaired cross-built wheel as a user gets it, under that torch: `pip install
    wheelops` off the PEP 503 index of dist/repaired served on 127.0.0.1 into a fresh
    emulated venv (pip takes the platform's wheel beside this machine's), the import check
    (the label, an op, the CUDA library of torch's major), the doctor (it exits non-zero
    where the install cannot serve), then the tests (the GPU ones left out; the subset as
    EMULATED_SUBSET_SELECT selects)."""
    spec, platform = TARGETS[target]
    write_index(session, REPAIRED)
    with index.serving(SITE) as root:
        url = f"{root}/{spec.name}"
        index.wait_for(f"{url}/wheelops/")
        with_tests = ["--with", *EMULATED_TEST_REQUIREMENTS]
        python = emulated_venv(session, platform, torch, venv, "--index-url", url, *with_tests)
    selected = ("-m", "not gpu") if tests == ("tests",) else EMULATED_SUBSET_SELECT
    with outside_checkout(session):
        check = IMPORT_CHECK.format(variant=spec.name)
        session.run(str(python), "-c", check, external=True)
        session.run(str(python), "-m", "wheelops", external=True)
        session.run(
            str(python),
            *("-m", "pytest", *(str(ROOT / t) for t in tests), *PYTEST_QUIET),
            "--durations=10",
            *selected,
            env=INSTALLED_ENV,
            external=True,
        )


def emulated(session: Session) -> None:
    """`nox -s emulated -- [TARGET] [--torch T]... [--all]`: a cross-built wheel under
    emulation with each torch its platform is tested with (or the named ones)."""
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
    every = list(spec.cross_torch(platform))
    for torch in torches:
        tests = ("tests",) if args.all else emulated_tests(torch, every)
        with tempfile.TemporaryDirectory() as scratch:  # a CUDA torch's venv: 4.6 GB
            test_emulated(session, args.target, torch, tests, Path(scratch) / "venv")


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


def write_index(session: Session, *sources: Path) -> None:
    """site/whl/<variant>/ (PEP 503) from the wheels in `sources`."""
    session.run("python", "-m", "build_tools.package.index", *map(str, sources), "--out", str(SITE))


def install_from_index(session: Session, variant: str, torch: str, venv: Path) -> None:
    """Serve site/ on loopback and `pip install wheelops --index-url .../whl/<variant>` into a
    fresh venv that has torch from the normal registry; then import it and run an op."""
    with index.serving(SITE) as root:
        url = f"{root}/{variant}"
        index.wait_for(f"{url}/wheelops/")
        install_torch(session, venv, variant, torch)
        # --isolated: pip's own configuration (extra indexes, find-links) must not supply
        # wheelops; torch is already installed, so the index alone must satisfy it.
        from_index = ["--index-url", url, "wheelops"]
        session.run(str(venv / "bin" / "pip"), "install", "--isolated", *from_index, external=True)
        python = str(venv / "bin" / "python")
        check = IMPORT_CHECK.format(variant=variant)
        with outside_checkout(session):
            session.run(python, "-c", check, external=True)
            # uv, too: its resolver reads the same PEP 503 pages its own way.
            uv = with_uv(session)[installer.UV_ENV]
            uv_install = [uv, "pip", "install", "--python", python, "--reinstall", "--no-deps"]
            session.run(*uv_install, *from_index, env=installer.UV_SETTINGS)
            session.run(python, "-c", check, external=True)
