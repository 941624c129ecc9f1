"""`python -m wheelops` reports where it is needed most (issue #29): without torch, on a
Python older than the wheel's floor, and (tests/test_damaged_install.py) with any file
damaged. It always prints a report, valid JSON with --json, and exits 1 exactly when
`import wheelops` raises. From a checkout with nothing built, an op says what to do."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _checkout import checkout_copy
from _helpers import user_env
from _native_fixtures import installed_copy, read_facts, run_python, served_library

import wheelops
from wheelops._compat.facts import this_process

PACKAGE = Path(wheelops.__file__).resolve().parent
DIST_INFO = next(iter(sorted(PACKAGE.parent.glob("wheelops-*.dist-info"))), None)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A copy of the install (the package and its dist-info) in a folder of its own."""
    root = tmp_path / "site"
    shutil.copytree(PACKAGE, root / "wheelops", ignore=shutil.ignore_patterns("__pycache__"))
    if DIST_INFO:
        shutil.copytree(DIST_INFO, root / DIST_INFO.name)
    return root


def run(
    python: str, site: Path, *args: str, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = user_env()
    env.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", HOME=str(site))
    env.update(env_extra or {})
    return subprocess.run(
        [python, *args], cwd=site, env=env, capture_output=True, text=True, timeout=300
    )


def both(
    python: str, site: Path, *flags: str, env_extra: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """`import wheelops` and the doctor's JSON, which must agree."""
    imported = run(python, site, *flags, "-c", "import wheelops", env_extra=env_extra)
    doctor = run(python, site, *flags, "-m", "wheelops", "--json", env_extra=env_extra)
    assert doctor.returncode >= 0 and imported.returncode >= 0, doctor.stderr + imported.stderr
    report = json.loads(doctor.stdout)
    assert report["exit_status"] == doctor.returncode == (1 if imported.returncode else 0)
    text = run(python, site, *flags, "-m", "wheelops", env_extra=env_extra)
    assert text.returncode == doctor.returncode and "verdict:" in text.stdout, text.stderr
    return imported, report


@pytest.mark.parametrize("skip_guard", [False, True], ids=["guard", "WHEELOPS_SKIP_GUARD=1"])
def test_without_torch(site: Path, skip_guard: bool) -> None:
    # -S: no site-packages, so no torch; the copy of wheelops comes from PYTHONPATH. The
    # switch does not skip it (#35: a raw ModuleNotFoundError and a reinstall fix).
    env = {"WHEELOPS_SKIP_GUARD": "1"} if skip_guard else None
    imported, report = both(sys.executable, site, "-S", env_extra=env)
    assert "ModuleNotFoundError" not in imported.stderr, imported.stderr[-2000:]
    assert "CompatibilityError" in imported.stderr and "torch is not installed" in imported.stderr
    (torch,) = [f for f in report["findings"] if f["check"] == "torch"]
    assert torch["status"] == "fatal" and torch["runtime"] == "not installed"
    # An index that exists: PyPI's torch for the universal wheel, PyTorch's for a variant.
    variant = wheelops.build_info().variant
    assert torch["fix"][0].startswith('pip install --upgrade "torch>=')
    assert ("--index-url" in torch["fix"][0]) == (variant != "universal"), torch
    assert "/whl/universal" not in torch["fix"][0]


def _old_pythons() -> list[str]:
    """Python 3.8 and 3.9 where this machine has them (pyenv's, or on PATH)."""
    found = []
    for version in ("3.8", "3.9"):
        pyenv = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
        candidates = [
            *sorted(glob.glob(f"{pyenv}/versions/{version}.*/bin/python")),
            shutil.which(f"python{version}"),
        ]
        # Not pyenv's shims: they need pyenv's own environment, which the tests replace.
        real = [c for c in candidates if c and "/shims/" not in c]
        found += [pytest.param(c, id=version) for c in real[:1]]
    return found or [pytest.param(None, id="none", marks=pytest.mark.skip("no Python < 3.10"))]


@pytest.mark.parametrize("python", _old_pythons())
def test_on_a_python_older_than_the_floor(site: Path, python: str) -> None:
    imported, report = both(python, site)
    assert "wheelops.CompatibilityError" in imported.stderr, imported.stderr[-2000:]
    assert "is older than 3.10, the oldest wheelops supports" in imported.stderr
    (finding,) = report["findings"]
    assert finding["check"] == "Python" and finding["status"] == "fatal"
    # #35: said "skippable": true (WHEELOPS_SKIP_GUARD cannot run 3.10 code on 3.9), and
    # gave no version (import stopped before it).
    assert finding["skippable"] is False
    assert report["wheelops"]["version"] == wheelops.__version__
    assert finding["fix"] == [
        "python3.12 -m venv .venv && . .venv/bin/activate && pip install wheelops"
    ]


def test_an_op_in_a_checkout_with_nothing_built_says_what_to_do(tmp_path: Path) -> None:
    checkout = checkout_copy(tmp_path)
    code = (
        "import torch, wheelops\n"
        "try:\n    wheelops.add(torch.ones(2), torch.ones(2))\n"
        "except RuntimeError as err:\n    print(err)\n"
    )
    done = run(sys.executable, checkout / "src", "-c", code)  # its package, as dev mode imports it
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wheelops.add: the wheelops native libraries are not built" in done.stdout
    assert "PYTHONPATH=src python -m build_tools.dev" in done.stdout


def test_doctor_on_a_working_install(tmp_path: Path) -> None:
    """Exit 0 and the right verdict, with warnings as errors: under torch 2.10/2.11 the doctor's
    first-use probe registered the ops' Python kernels a second time, a fatal `import` finding
    (2.13 and later: torch's "Overriding a previously registered kernel" warning) (#42). Not
    marked slow, so that every cell of the matrix runs it (build_tools/run/rows.py
    `tests_of_cell`)."""
    package = installed_copy(tmp_path)
    text = run_python(package, "-W", "error", "-m", "wheelops")
    assert text.returncode == 0, text.stdout + text.stderr[-3000:]
    assert "Warning" not in text.stderr, text.stderr[-3000:]
    assert "verdict:" in text.stdout and "checks" in text.stdout and "relu_scale" in text.stdout
    result = run_python(package, "-W", "error", "-m", "wheelops", "--json")
    report = json.loads(result.stdout)
    assert report["exit_status"] == result.returncode == 0, report
    assert report["build"] == {**wheelops.build_info().to_dict(), **read_facts(package)}
    assert report["runtime"]["torch_version"] == torch.__version__
    ops = {row["op"]: row for row in report["ops"]}
    assert set(ops) >= {"add", "relu_scale", "bias_gelu", "bias_gelu_backward"}
    assert all(row["cpu"] for row in ops.values())
    cuda_served = served_library(Path()) != "_ops_cpu.abi3.so"
    assert all(row["cuda"] == cuda_served for row in ops.values())
    checks = {f["check"]: f for f in report["findings"]}
    assert "import" not in checks, checks.get("import")
    cuda_torch = this_process().torch_kind == "cuda"
    # The right verdict: a CUDA build under a CPU-only torch serves its CPU kernels only.
    degraded = {name for name, f in checks.items() if f["status"] == "degraded"}
    assert report["verdict"] == ("degraded" if degraded else "ok"), checks
    if not cuda_torch and wheelops.build_info().cuda_libraries:
        assert checks["torch build"]["status"] == "degraded"
        assert (
            "is CPU-only, so wheelops loads its CPU kernels only"
            in checks["torch build"]["message"]
        )
    assert report["guard"]["enabled"] is True
