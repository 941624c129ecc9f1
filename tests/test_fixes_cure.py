"""Every fix the guard prints that can run here is run, and must cure what it names.

A venv gets the wheel under test from a PEP 503 index served on 127.0.0.1
(WHEELOPS_INDEX_URL points the guard's commands at it, the universal wheel's too, as at a
mirror; PIP_INDEX_URL at a loopback stand-in for PyPI holding the universal wheel,
unlabelled), an install fault is
made, the guard's own fix commands are taken from `python -m wheelops --json`
and run as printed, and then `import wheelops` must work and the finding be
gone. Commands that need the internet (PyTorch's index) cannot run here; the
policy tests check their text.

The wheels come from WHEELOPS_TEST_WHEELHOUSE (nox sets it to dist/repaired); a variant
it lacks is cut from its universal wheel (build_tools/package/relabel.py's slim: its CPU library
and the CUDA library of the variant's major), so that every fix a cell can print runs.
Fixes that change the environment (`unset WHEELOPS_CUDA_LIBRARY`, `export CXX=...`) are
run by changing the environment the venv's commands get.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from _helpers import user_env
from _loopback import served, wheelhouse_index
from _native_fixtures import build_broken_libraries, served_library, truncated, with_cuda_version

import wheelops
from wheelops._compat.facts import this_process
from wheelops._compat.matrix import matrix

pytestmark = pytest.mark.slow

WHEELHOUSE = os.environ.get("WHEELOPS_TEST_WHEELHOUSE")
if not WHEELHOUSE:
    pytest.skip("set WHEELOPS_TEST_WHEELHOUSE to a folder of built wheels", allow_module_level=True)
CUDA_TORCH = this_process().torch_kind == "cuda"
BUILD = wheelops.build_info()
PYPI = matrix().pypi_variant
RUN_AN_OP = "import torch, wheelops; print(wheelops.add(torch.ones(2), torch.ones(2)).tolist())"


class Venv:
    def __init__(self, root: Path, base_url: str, variants: set[str]) -> None:
        self.root, self.variants = root, variants
        self.extra_env: dict[str, str] = {}  # what a fault sets; a fix may unset it
        self.index_url = f"{base_url}/whl"
        self.pypi_url = f"{base_url}/pypi"  # stands in for PyPI: the universal wheel
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
        # torch (and the rest) from the environment under test, after the venv's own
        # site-packages: the wheelops installed here shadows the one under test.
        site = next((root / "lib").glob("python3*/site-packages"))
        (site / "_outer.pth").write_text(str(Path(torch.__file__).resolve().parent.parent) + "\n")
        self.site = site

    @property
    def env(self) -> dict[str, str]:
        # A neutral pip (no configured extra indexes or find-links): the printed command
        # alone must find the wheel.
        env = user_env("PIP_")
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["WHEELOPS_INDEX_URL"] = self.index_url
        env["PIP_CONFIG_FILE"] = os.devnull
        env["PIP_INDEX_URL"] = self.pypi_url  # where a command without --index-url goes
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        return {**env, **self.extra_env}

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        if command.startswith("unset "):  # the fix is the environment's, not a program
            for name in command.split()[1:]:
                self.extra_env.pop(name, None)
            return subprocess.CompletedProcess(command, 0, "", "")
        return subprocess.run(
            command,
            shell=True,
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def python(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.root / "bin" / "python"), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    @property
    def package(self) -> Path:
        return self.site / "wheelops"

    def install(self, variant: str) -> None:
        done = self.run(self.command(variant))
        assert done.returncode == 0, done.stdout + done.stderr

    def restore(self, variant: str) -> None:
        """`variant` installed as the guard's command installs it: by pip the first time,
        then from a copy of that install (pip's work is the same each time; the copy takes
        a fraction of it)."""
        snapshot = self.root.parent / f"installed-{variant}"
        if not snapshot.exists():
            self.install(variant)
            for path in self._installed():
                shutil.copytree(path, snapshot / path.name)
            return
        for path in self._installed():
            shutil.rmtree(path)
        for path in snapshot.iterdir():
            shutil.copytree(path, self.site / path.name)

    def _installed(self) -> list[Path]:
        return [self.package, *self.site.glob("wheelops-*.dist-info")]

    def command(self, variant: str) -> str:
        """The guard's own reinstall command for `variant`, against these indexes."""
        return replace(matrix(), index_url=self.index_url, mirrored=True).install_command(variant)

    def runnable(self, command: str) -> bool:
        return command.startswith("unset ") or self.variant_of(command) is not None

    def variant_of(self, command: str) -> str | None:
        """The variant a printed command installs, if it installs wheelops from us."""
        # pip's way in: --force-reinstall, or --ignore-installed where RECORD is gone
        starts = {m.pip_install for m in (matrix(), matrix().for_install(("RECORD", "")))}
        if not any(command.startswith(f"{start} wheelops") for start in starts):
            return None
        if "--index-url" not in command:
            return PYPI
        url, _, variant = command.split("--index-url ", 1)[1].rpartition("/")
        return variant if url == self.index_url else None

    def report(self) -> dict:
        done = self.python("-m", "wheelops", "--json")
        assert done.returncode in (0, 1), done.stderr[-3000:]
        report = json.loads(done.stdout)
        assert report["exit_status"] == done.returncode
        assert report["wheelops"]["location"] == str(self.package.resolve())
        return report


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    root = tmp_path_factory.mktemp("fixes")
    variants = wheelhouse_index(Path(WHEELHOUSE), root)
    if BUILD.variant not in variants:
        pytest.skip(f"the wheelhouse has no {BUILD.variant} wheel (the one under test)")
    with served(root / "site") as url:
        yield Venv(root / "venv", url, variants)


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_broken_libraries(tmp_path_factory.mktemp("broken"))


def _facts(venv: Venv) -> dict:
    return json.loads((venv.package / "_build_info.json").read_text())


def _write_facts(venv: Venv, facts: dict) -> None:
    (venv.package / "_build_info.json").write_text(json.dumps(facts))


def _set_facts(venv: Venv, **changes: object) -> None:
    _write_facts(venv, {**_facts(venv), **changes})


def _other() -> str:
    """A CUDA release of the other major than torch's."""
    return "12.8" if (this_process().torch_cuda or "").startswith("13.") else "13.0"


def _slot(venv: Venv) -> Path:
    """The library a fault breaks: the CUDA one where it would load, else the CPU one."""
    return venv.package / served_library(venv.package)


FAULTS: dict[str, tuple[Callable[[Venv, dict[str, Path]], None], str]] = {
    # name: (make the fault, the check whose finding it raises)
    "truncated library": (lambda v, b: truncated(_slot(v), _slot(v)), "library"),
    "missing library": (lambda v, b: _slot(v).unlink(), "library"),
    "missing build facts": (lambda v, b: (v.package / "_build_info.json").unlink(), "build facts"),
    "damaged build facts": (
        lambda v, b: (v.package / "_build_info.json").write_text("garbage{"),
        "build facts",
    ),
    "torch C++ ABI": (
        lambda v, b: _slot(v).write_bytes(b["missing_c10_symbol"].read_bytes()),
        "library",
    ),
    "another platform": (lambda v, b: _set_facts(v, platform="linux_riscv64"), "platform"),
    "CUDA major": (lambda v, b: _write_facts(v, with_cuda_version(_facts(v), _other())), "CUDA"),
    "cpu variant under a CUDA torch": (
        lambda v, b: _set_facts(v, cuda_libraries=[]),
        "torch build",
    ),
    # Issue #29: a sibling library in the slot aborted the process (every op twice).
    "library swapped for a sibling": (
        lambda v, b: _slot(v).write_bytes(_sibling(v).read_bytes()),
        "library",
    ),
    "bytes changed in a library's middle": (lambda v, b: _change_middle(_slot(v)), "library"),
    # pip cannot uninstall without RECORD: --force-reinstall fails, the fix must not (#46)
    "RECORD deleted and a library changed": (
        lambda v, b: (_record(v).unlink(), _change_middle(_slot(v))),
        "library",
    ),
    "empty build facts": (lambda v, b: _write_facts(v, {}), "build facts"),
    "override not a CUDA major": (
        lambda v, b: v.extra_env.update(WHEELOPS_CUDA_LIBRARY="0"),
        "CUDA",
    ),
}


def _record(venv: Venv) -> Path:
    (dist_info,) = venv.site.glob("wheelops-*.dist-info")
    return dist_info / "RECORD"


def _sibling(venv: Venv) -> Path:
    slot = _slot(venv)
    return next(p for p in sorted(venv.package.glob("_ops_*.so")) if p != slot)


def _change_middle(library: Path) -> None:
    data = bytearray(library.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4096] = bytes(b ^ 0x5A for b in data[middle : middle + 4096])
    library.write_bytes(bytes(data))


@pytest.mark.parametrize("fault", list(FAULTS))
def test_the_printed_fix_cures_it(venv: Venv, broken: dict[str, Path], fault: str) -> None:
    make, check = FAULTS[fault]
    if fault == "CUDA major" and served_library(venv.package).startswith("_ops_cpu"):
        pytest.skip("a CUDA version to mismatch needs a CUDA build under a CUDA torch")
    if fault == "cpu variant under a CUDA torch" and not CUDA_TORCH:
        pytest.skip("needs a CUDA torch")
    if fault == "override not a CUDA major" and not CUDA_TORCH:
        pytest.skip("WHEELOPS_CUDA_LIBRARY is read under a CUDA torch only")
    if fault == "library swapped for a sibling" and not BUILD.cuda_libraries:
        pytest.skip("the cpu wheel holds one library: no sibling to swap in")
    venv.extra_env.clear()
    venv.restore(BUILD.variant)
    make(venv, broken)
    with ThreadPoolExecutor(2) as pool:  # two processes, each paying torch's import
        reported = pool.submit(venv.report)
        imported = venv.python("-c", "import wheelops")
        before = reported.result()
    (finding,) = [
        f
        for f in before["findings"]
        if f["status"] != "ok" and (f["check"] == check or f["check"].endswith(" " + check))
    ]
    runnable = [c for c in finding["fix"] if venv.runnable(c)]
    assert runnable, f"no fix installs wheelops from its indexes: {finding}"
    command = runnable[0]
    variant = venv.variant_of(command) or BUILD.variant
    assert variant in venv.variants, f"{command}: no {variant} wheel, nor a universal one to cut"
    # Import and doctor agree before the fix ...
    assert (imported.returncode != 0) == (before["exit_status"] == 1), imported.stderr[-2000:]
    if before["exit_status"]:
        assert command in imported.stderr  # the refusal prints the same command
    done = venv.run(command)
    assert done.returncode == 0, done.stdout + done.stderr
    # ... and after it: cured.
    with ThreadPoolExecutor(2) as pool:
        reported = pool.submit(venv.report)
        ran = venv.python("-c", RUN_AN_OP)
        after = reported.result()
    assert after["exit_status"] == 0, after["findings"]
    assert not [f for f in after["findings"] if f["check"] == finding["check"] and f["fix"]]
    assert after["wheelops"]["variant"] == variant
    assert ran.returncode == 0 and ran.stdout.strip() == "[2.0, 2.0]", ran.stderr[-2000:]


def test_the_printed_fix_cures_a_damaged_module(venv: Venv) -> None:
    """A module overwritten with NUL bytes: import raises DamagedInstallError naming it and
    the reinstall command, which cures it as printed."""
    venv.restore(BUILD.variant)
    module = venv.package / "ops" / "add.py"
    module.write_bytes(b"\0" * 64)
    imported = venv.python("-c", "import wheelops")
    assert imported.returncode == 1
    error = imported.stderr.strip().splitlines()
    headline = next(line for line in error if line.startswith("wheelops.DamagedInstallError"))
    assert str(module.resolve()) in headline or str(module) in headline, headline
    command = headline.split("Reinstall it: ", 1)[1]
    assert command == venv.command(BUILD.variant)
    done = venv.run(command)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = venv.python("-c", RUN_AN_OP)
    assert ran.returncode == 0 and ran.stdout.strip() == "[2.0, 2.0]", ran.stderr[-2000:]
    report = venv.report()
    (files,) = [f for f in report["findings"] if f["check"] == "installed files"]
    assert files["status"] == "ok", files
