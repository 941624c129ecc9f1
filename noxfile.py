"""Build and test wheelops: `nox -s build` (the wheel for this machine), `nox -s lint tests`."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_tools.build_facts import git_commit

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True

ROOT = Path(__file__).resolve().parent
# The torch a wheel is built against (its headers set the ABI floor via
# TORCH_TARGET_VERSION, not this version) and the CUDA toolkit that matches it.
BUILD_TORCH = "2.14.1"
CPU_TEST_TORCH = "2.13.0"  # a CPU-only torch: the CUDA library must stay unloaded under it
TOOLKIT_COMPONENTS = "nvcc,cudart,crt,nvvm,cccl"
BUILD_REQUIREMENTS = ["setuptools>=77", "wheel", "ninja"]
TEST_REQUIREMENTS = ["pytest>=8", "expecttest", "numpy"]
CI_ARCH_LIST = "9.0"  # CI compiles one arch: compile and link errors surface, quickly
CI_WHEEL_DIR = ROOT / "build" / "ci-wheel"


def _install_build_environment(session: nox.Session) -> None:
    """torch, and the CUDA toolkit pinned to exactly the one torch was built with."""
    session.install(f"torch=={BUILD_TORCH}", *BUILD_REQUIREMENTS)
    # A CUDA torch depends on the exact cuda-toolkit release it was built with;
    # read that from the package metadata (importing torch would print warnings).
    probe = (
        "import importlib.metadata as m\n"
        "try:\n    print(m.version('cuda-toolkit'))\n"
        "except m.PackageNotFoundError:\n    print('none')\n"
    )
    output = session.run("python", "-c", probe, silent=True) or "none"
    toolkit = output.strip().splitlines()[-1]
    if toolkit == "none":
        toolkit = ""
    if toolkit:
        session.install(f"cuda-toolkit[{TOOLKIT_COMPONENTS}]=={toolkit}")


def _build_wheel(session: nox.Session, out_dir: Path, arch_list: str | None) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("wheelops-*.whl"):
        old.unlink()
    env = {"WHEELOPS_CUDA": os.environ.get("WHEELOPS_CUDA", "auto")}
    if arch_list:
        env["TORCH_CUDA_ARCH_LIST"] = arch_list
    with tempfile.TemporaryDirectory() as build_dir:
        # A fresh build tree every time: stale objects never reach a wheel.
        staged = Path(build_dir) / "src"
        shutil.copytree(
            ROOT, staged, ignore=shutil.ignore_patterns(".nox", "build", "dist", ".git")
        )
        # The staged copy has no .git: record the checkout's commit.
        env["WHEELOPS_GIT_COMMIT"] = git_commit()
        session.run(
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(out_dir),
            str(staged),
            env=env,
        )
    (wheel,) = out_dir.glob("wheelops-*.whl")
    if "-cp310-abi3-" not in wheel.name:
        session.error(f"{wheel.name} is not a cp310-abi3 wheel")
    with zipfile.ZipFile(wheel) as archive:
        facts = json.loads(archive.read("wheelops/_build_info.json"))
    session.log(
        f"built {wheel.name}: CUDA {facts['cuda_version']}, archs {facts['cuda_arch_list']}"
    )
    return wheel


def _run_tests(session: nox.Session, *extra: str) -> None:
    """Run the suite against the installed wheel, from outside the source tree."""
    with tempfile.TemporaryDirectory() as cwd:
        session.chdir(cwd)
        session.run(
            "pytest",
            str(ROOT / "tests"),
            "-ra",
            "-p",
            "no:cacheprovider",
            *extra,
            *session.posargs,
            env={"WHEELOPS_TEST_INSTALLED": "1"},
        )
        session.chdir(ROOT)


@nox.session
def build(session: nox.Session) -> None:
    """The main job: this machine's wheel (CPU + CUDA 13 kernels for every arch) into dist/.

    TORCH_CUDA_ARCH_LIST overrides the arch list; WHEELOPS_CUDA=0 builds CPU only.
    """
    _install_build_environment(session)
    wheel = _build_wheel(session, ROOT / "dist", os.environ.get("TORCH_CUDA_ARCH_LIST"))
    session.log(f"wheel: {wheel}")


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff==0.17.5")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def tests(session: nox.Session) -> None:
    """Build a one-arch wheel, test it under the CUDA torch (no GPU needed), then under a
    CPU-only torch (`tests_cpu_torch`)."""
    _install_build_environment(session)
    session.install(*TEST_REQUIREMENTS)
    wheel = _build_wheel(
        session, CI_WHEEL_DIR, os.environ.get("TORCH_CUDA_ARCH_LIST", CI_ARCH_LIST)
    )
    session.install(str(wheel))
    _run_tests(session)
    session.notify("tests_cpu_torch")


@nox.session
def tests_cpu_torch(session: nox.Session) -> None:
    """The wheel from `tests` under torch 2.13.0 (CPU-only): CPU library only, ops on CPU."""
    wheels = sorted(CI_WHEEL_DIR.glob("wheelops-*.whl"))
    if not wheels:
        session.error("no wheel in build/ci-wheel: run `nox -s tests` first")
    session.install(f"torch=={CPU_TEST_TORCH}", *TEST_REQUIREMENTS)
    session.install(str(wheels[0]))
    _run_tests(session, "-m", "not gpu")
