"""Damaged installs, systematically (issues #19, #29): every file of the installed wheelops
deleted, truncated, replaced by random bytes, or made unreadable; each native library also
swapped for a sibling library (another valid wheelops library in its place, which would
register every op twice: an abort) and changed by 4 KB of random bytes in its middle (its
headers intact, so only its hash tells). A Python or data file is read whole and parsed,
so a change in its middle is no different from the random bytes case. The libraries are
damaged once more with no dist-info installed at all (#35): their build facts' sha256 tells.

Each case damages one file in a hard-linked copy of the install (the package and its
dist-info) and runs, each in a fresh process (forked from one that imported torch only:
tests/_warm_python.py), `import wheelops` plus an op, and `python -m wheelops --json`.
Neither may die of a signal or hang. Import either works or raises wheelops' own error
(CompatibilityError, DamagedInstallError) naming the file and the reinstall command; the
doctor agrees (exit 1 exactly when import fails, naming the file) and always prints valid
JSON. Where import works, the doctor names a damaged file that the wheel's RECORD lists.
Then the fix it printed (the first reinstall, or the one import's error names) runs as
printed, with pip, in a venv whose site-packages holds the damaged install, and `import
wheelops` plus an op must work and the damaged package file be the wheel's again (#46: the
RECORD-less install's `--force-reinstall` failed when run). The indexes are served from the
wheelhouse on 127.0.0.1 (tests/_loopback.py): the command's index URL is replaced by its
copy's, as WHEELOPS_INDEX_URL prints it (tests/test_fixes_cure.py runs that variable end to
end).

Python itself runs four files before any wheelops code can: `wheelops/__init__.py`,
`wheelops/_damage.py` and, for the doctor, `wheelops/__main__.py`, which runs the doctor's
command line, `wheelops/_doctor_cli.py`. Damage there gets Python's own error, which the
tests require to be an error and not a crash (docs/troubleshooting.md lists them).

The full matrix (every file) runs in `nox -s damage` (CI, under a CPU torch); the suite
runs the libraries its import loads and one op module (WHEELOPS_TEST_DAMAGE=all selects
every file). Each kind of case's fix runs once per session, on whichever pytest-xdist worker
meets it first (Cure.needed; WHEELOPS_TEST_CURE=all: every case's).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from _helpers import user_env
from _loopback import served, wheelhouse_index
from _warm_python import Command, WarmPython

import wheelops
from wheelops._compat import loader, record
from wheelops._compat import matrix as matrix_model
from wheelops._compat.facts import BuildInfo
from wheelops._compat.matrix import MATRIX_FILE, matrix
from wheelops._damage import FALLBACK_FIX
from wheelops.ops import _accel

PACKAGE = Path(wheelops.__file__).resolve().parent
SITE = PACKAGE.parent
DIST_INFO = next(iter(sorted(SITE.glob("wheelops-*.dist-info"))), None)  # None: a checkout
BUILD = wheelops.build_info()
# The reinstall of this install: from the file pip installed it from where no index serves
# its label (a wheel built here), else from its index; without a dist-info, by variant.
FIX = matrix().reinstall_command(
    record.installed_version(PACKAGE), BUILD.variant, record.installed_from(PACKAGE)
)
FIX_WITHOUT_DIST_INFO = matrix().reinstall_command(None, BUILD.variant)
# Run by Python before wheelops can check anything: Python's own error is the outcome.
PYTHON_RUNS_FIRST = {"wheelops/__init__.py", "wheelops/_damage.py"}
# The doctor's own files: damaged, the doctor cannot run (it names its module and says
# the install serves), while import works.
DOCTOR_ONLY = {
    "wheelops/_compat/doctor.py",
    "wheelops/_compat/probes.py", "wheelops/_compat/links.py",  # what only the doctor reads
    "wheelops/_compat/rules/install.py",  # the rules over what only the doctor probes
}  # fmt: skip
# The matrix model, its data and its code: read only for a command to print (the doctor's
# fixes, a refusal's), never by an import whose checks pass (#38): damaged, import works and
# the doctor cannot run; it names the file, and without the matrix no variant's index: the
# reinstall from PyPI (the universal wheel). (Where import prints a command, as the universal
# wheel's under a CPU torch does, import fails on it instead, naming it.)
# What `python -m wheelops` runs before the doctor can report: damaged, Python's own error
# (exit 1; runpy's for __main__.py may name nothing), while import works.
DOCTOR_ENTRY = {"wheelops/__main__.py", "wheelops/_doctor_cli.py"}
READ_FOR_COMMANDS = {
    p.resolve().relative_to(SITE).as_posix() for p in (MATRIX_FILE, Path(matrix_model.__file__))
}
DAMAGES = ("deleted", "truncated", "random bytes", "unreadable")
LIBRARY_DAMAGES = ("swapped for a sibling library", "bytes changed in the middle")
RUN = (
    "import torch, wheelops\n"
    "x = torch.arange(6.0)\n"
    "assert torch.equal(wheelops.add(x, x), 2 * x)\n"
    "print('WORKS')\n"
)


def installed_files() -> list[str]:
    roots = [PACKAGE, *([DIST_INFO] if DIST_INFO else [])]
    return sorted(
        str(p.relative_to(SITE))
        for root in roots
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def served_libraries() -> set[str]:
    """The file names of the libraries this import loads (the CPU one, and under a CUDA
    torch the CUDA one, which nox -s damage, under a CPU torch, never loads)."""
    loaded = loader.loaded()
    return {Path(p).name for p in ([loaded.cpu, loaded.cuda] if loaded else []) if p}


def sample(files: list[str]) -> list[str]:
    """The suite's sample (every run of the suite pays for it): the libraries this import
    loads and an op module. `nox -s damage` runs every file."""
    served = served_libraries()
    return [f for f in files if Path(f).name in served or f.endswith("/ops/add.py")]


def other_torchs_accelerator(relative: str) -> bool:
    """An accelerator built for another torch release (wheelops/_accel/torch2_11_0/...):
    never mapped under this torch, and checked by RECORD as any data file is."""
    parts = Path(relative).parts
    return parts[:2] == ("wheelops", "_accel") and parts[2] != _accel.folder(_accel.torch_version())


FILES = installed_files()
CASES = [
    f
    for f in (FILES if os.environ.get("WHEELOPS_TEST_DAMAGE") == "all" else sample(FILES))
    if not other_torchs_accelerator(f)
]
LIBRARIES = [f for f in FILES if f.endswith(".so")]
# A wheel of one library (the cpu variant) has no sibling to swap in.
LIBRARY_CASES = [
    (f, how)
    for f in CASES
    if f in LIBRARIES
    for how in LIBRARY_DAMAGES
    # the sibling is another native library of the ops (the accelerators are not siblings)
    if how != "swapped for a sibling library" or any(o != f and "_ops_" in o for o in LIBRARIES)
]


_PR_CAPBSET_DROP = 24
_DAC_CAPABILITIES = (1, 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH: root reads anything


def _without_dac_override() -> None:
    """In the child before exec: drop root's permission-bypassing capabilities from the
    bounding set, so that the executed Python meets a mode-000 file as any user would."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in _DAC_CAPABILITIES:
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def unreadable_runner() -> dict[str, object]:
    """How a subprocess meets an unreadable file: as root, only without the capabilities
    that let root read anything."""
    if os.geteuid() != 0:
        return {}
    probe = subprocess.run(["true"], preexec_fn=_without_dac_override, capture_output=True)
    if probe.returncode != 0:
        pytest.skip("running as root without CAP_SETPCAP: cannot make a file unreadable")
    return {"preexec_fn": _without_dac_override}


class Cure:
    """A venv (torch from the environment under test, after its own site-packages) whose
    site-packages holds a case's damaged install: the printed fix runs there, as a user
    would run it, and import again."""

    def __init__(self, root: Path, base_url: str, cured: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
        self.root = root
        self.site = next((root / "lib").glob("python3*/site-packages"))
        (self.site / "_outer.pth").write_text(str(Path(torch.__file__).parent.parent) + "\n")
        self.index_url = f"{base_url}/whl"
        self.pypi_url = f"{base_url}/pypi"  # stands in for PyPI: the universal wheel
        self.cured = cured  # a file per kind of case cured, shared by the session's workers

    @property
    def env(self) -> dict[str, str]:
        env = user_env("PIP_")
        env.update(
            PATH=f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            HOME=str(self.root),
            PYTHONDONTWRITEBYTECODE="1",
            PIP_CONFIG_FILE=os.devnull,  # a neutral pip: the printed command alone finds it
            PIP_INDEX_URL=self.pypi_url,  # where a command without --index-url goes
            PIP_DISABLE_PIP_VERSION_CHECK="1",
        )
        return env

    def serves(self, command: str) -> bool:
        """Whether the loopback copy holds what the command installs (PyPI's universal
        wheel is there only where the wheelhouse has it)."""
        if "--index-url" in command or ".whl" in command:
            return True
        return any((self.root.parent / "site" / "pypi" / "wheelops").glob("*.whl"))

    def take(self) -> Path:
        """Its site-packages, without the last case's install: the next case's site (so that
        the paths the case prints are where pip meets them)."""
        for old in self.site.glob("wheelops*"):
            shutil.rmtree(old)
        return self.site

    def needed(self, command: str, relative: str, how: str) -> bool:
        """Whether this case's fix still needs running: once per kind of case (the damaged
        file's kind, how, the command with this venv's paths taken out) in the session, on
        whichever worker meets it first; every case where WHEELOPS_TEST_CURE=all. A fix's
        text and pip's work differ only by those: 312 runs cost CI 20 minutes for what
        30-odd show."""
        if os.environ.get("WHEELOPS_TEST_CURE") == "all":
            return True
        kind = (_file_kind(relative), how, command.replace(str(self.root), "<venv>"))
        marker = self.cured / hashlib.sha256(repr(kind).encode()).hexdigest()
        try:
            marker.open("x").close()
        except FileExistsError:
            return False
        return True

    def __call__(self, command: str, how_to_run: dict, pristine: Path) -> None:
        command = command.replace(matrix_model.read()["index_url"].rstrip("/"), self.index_url)
        env, pipes = self.env, {"capture_output": True, "text": True, "timeout": 300}
        fixed = subprocess.run(command, shell=True, cwd=self.root, env=env, **pipes, **how_to_run)
        assert fixed.returncode == 0, f"{command}:\n{fixed.stdout[-2000:]}{fixed.stderr[-2000:]}"
        python = str(self.root / "bin" / "python")
        ran = subprocess.run([python, "-c", RUN], cwd=self.root, env=env, **pipes, **how_to_run)
        assert "WORKS" in ran.stdout, f"after {command}:\n{ran.stderr[-3000:]}"
        package = PACKAGE.name
        for path in (pristine / package).rglob("*"):
            if path.is_file():
                mine = self.site / path.relative_to(pristine)
                assert mine.read_bytes() == path.read_bytes(), f"after {command}: {mine}"


def _file_kind(relative: str) -> str:
    """A .dist-info file by name (pip reads each its own way), else the package file's kind:
    a native library, a module, data."""
    path = Path(relative)
    if path.parent.name.endswith(".dist-info"):
        return path.name
    return {".so": "library", ".py": "module"}.get(path.suffix, "data")


@pytest.fixture(scope="module")
def cure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cure | None]:
    """The fixes are run where the wheelhouse has the wheel under test (nox sets it);
    None elsewhere (a checkout in dev mode has no wheel to reinstall)."""
    wheelhouse = os.environ.get("WHEELOPS_TEST_WHEELHOUSE")
    if not wheelhouse:
        yield None
        return
    root = tmp_path_factory.mktemp("cure")
    if BUILD.variant not in wheelhouse_index(Path(wheelhouse), root):
        yield None
        return
    # A pytest-xdist worker's base temp is a folder of the session's: the workers share it.
    session = tmp_path_factory.getbasetemp()
    session = session.parent if os.environ.get("PYTEST_XDIST_WORKER") else session
    cured = session / "cured-kinds"
    cured.mkdir(exist_ok=True)
    with served(root / "site") as url:
        yield Cure(root / "venv", url, cured)


def printed_fix(imported: subprocess.CompletedProcess[str], doctor: str) -> str | None:
    """The reinstall the case printed: the doctor's first, else the one import's error names
    (the doctor cannot run where its own files are damaged)."""
    try:
        fixes = json.loads(doctor)["fixes"]
    except ValueError:
        fixes = []
    said = last_error(imported.stderr)
    if not fixes and "Reinstall it: " in said:
        fixes = [said.split("Reinstall it: ", 1)[1].splitlines()[0]]
    return next((f for f in fixes if "pip install" in f and "wheelops" in f), None)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the install, hard-linked from per case (the same file system)."""
    root = tmp_path_factory.mktemp("pristine")
    shutil.copytree(PACKAGE, root / "wheelops", ignore=shutil.ignore_patterns("__pycache__"))
    if DIST_INFO:
        shutil.copytree(DIST_INFO, root / DIST_INFO.name)
    return root


def damage(site: Path, relative: str, how: str) -> bool:
    """Damage the file; False where that leaves it as it was (truncating an empty file)."""
    path = site / relative
    data = path.read_bytes()
    if how == "truncated" and not data:
        return False
    path.unlink()  # breaks the hard link: the pristine copy stays whole
    if how == "swapped for a sibling library":
        sibling = next(f for f in LIBRARIES if f != relative and "_ops_" in f)
        path.write_bytes((site / sibling).read_bytes())
    elif how == "bytes changed in the middle":
        middle = len(data) // 2
        noise = random.Random(relative).randbytes(4096)
        path.write_bytes(data[:middle] + noise + data[middle + len(noise) :])
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "random bytes":
        path.write_bytes(random.Random(relative).randbytes(max(len(data), 64)))
    elif how == "unreadable":
        path.write_bytes(data)
        path.chmod(0)
    return True


@pytest.fixture(scope="module")
def warm() -> Iterator[Callable[[dict], WarmPython]]:
    """The warm Python server for a kind of start (how_to_run: as root without the
    capabilities to read anything, or not), started on first use; each worker's own."""
    servers: dict[bool, WarmPython] = {}

    def server(how_to_run: dict) -> WarmPython:
        key = bool(how_to_run)
        if key not in servers:
            servers[key] = WarmPython(user_env(), how_to_run.get("preexec_fn"))
        return servers[key]

    yield server
    for started in servers.values():
        started.close()


def run_both(
    warm: Callable[[dict], WarmPython], site: Path, how_to_run: dict
) -> tuple[subprocess.CompletedProcess[str], ...]:
    """`import wheelops` + an op, and the doctor, side by side, each in a fresh process
    forked from one that imported torch (tests/_warm_python.py)."""
    env = user_env()
    env.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", HOME=str(site))
    commands = (
        Command(site, env, code=RUN),
        Command(site, env, module="wheelops", args=("--json",)),
    )
    done = warm(how_to_run).run(commands, timeout=300)
    for process in done:
        assert process.returncode >= 0, (
            f"killed by signal {-process.returncode}: {process.stderr[-2000:]}"
        )
    return tuple(done)


def last_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    start = next((i for i in range(len(lines) - 1, -1, -1)
                  if lines[i].startswith(("wheelops.", "Traceback"))), 0)  # fmt: skip
    return "\n".join(lines[start:])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("relative", "how"), [(f, how) for f in CASES for how in DAMAGES] + LIBRARY_CASES
)
def test_a_damaged_file_is_refused_by_name_or_works(pristine, cure, warm, tmp_path, relative, how):
    how_to_run = unreadable_runner() if how == "unreadable" else {}
    site = cure.take() if cure else tmp_path / "site"
    shutil.copytree(pristine, site, copy_function=os.link, dirs_exist_ok=True)
    damaged = damage(site, relative, how)
    path = str(site / relative)

    imported, doctor = run_both(warm, site, how_to_run)
    judge_damage(site, relative, damaged, path, imported, doctor)
    # What it printed cures it. Python's own error (a file it runs first) prints nothing:
    # docs/troubleshooting.md gives the reinstall there.
    fix = printed_fix(imported, doctor.stdout) or (FIX if relative in PYTHON_RUNS_FIRST else None)
    runs = cure is not None and fix is not None and cure.serves(fix)
    if runs and cure.needed(fix, relative, how):
        cure(fix, how_to_run, pristine)


def reinstalls(site: Path) -> set[str]:
    """The reinstalls the damage of this copy may print: where pip cannot read its
    .dist-info, every command works around it (Matrix.for_install)."""
    dist_info = [str(site / DIST_INFO.name)] if DIST_INFO else []
    version, built_from = record.installed_version(PACKAGE), record.installed_from(PACKAGE)
    blocks = [None, *((file, d) for file in ("RECORD", "METADATA") for d in dist_info)]
    return {
        matrix().for_install(block).reinstall_command(version, BUILD.variant, built_from)
        for block in blocks
    }


def judge_damage(
    site: Path,
    relative: str,
    damaged: bool,
    path: str,
    imported: subprocess.CompletedProcess[str],
    doctor: subprocess.CompletedProcess[str],
) -> None:
    """What import and the doctor said of the damage."""
    said = doctor.stdout + doctor.stderr
    works = imported.returncode == 0 and "WORKS" in imported.stdout

    if relative in PYTHON_RUNS_FIRST:
        return  # Python's own error (or a namespace package): no signal, no hang, above
    if relative not in DOCTOR_ENTRY:  # Python's own error where the doctor's entry is damaged
        report = json.loads(doctor.stdout)  # always a report, also where import fails
        assert report["exit_status"] == doctor.returncode, said[-3000:]
    if DIST_INFO is None and relative.endswith(".py") and not works:
        return  # a source tree: a broken module raises Python's own error, for its developer
    if not works:
        error = last_error(imported.stderr)
        assert error.startswith(("wheelops.CompatibilityError", "wheelops.DamagedInstallError")), (
            imported.stderr[-3000:]
        )
        assert path in error, error
        assert FIX in error or "pip install" in error, error
        assert doctor.returncode == 1, said[-3000:]
        assert path in said, said[-3000:]
        return
    if relative in DOCTOR_ENTRY and doctor.returncode != 0:  # Python's own error, no report
        assert not doctor.stdout, said[-3000:]  # (damage in __main__.py's comment: it runs)
        return
    if relative in DOCTOR_ONLY | READ_FOR_COMMANDS:  # import works: the doctor says so, and
        report = json.loads(doctor.stdout)  # what is damaged (#35)
        assert doctor.returncode == 0 and report["verdict"] == "degraded", said[-3000:]
        fix = FALLBACK_FIX if relative in READ_FOR_COMMANDS else FIX
        assert path in said and report["fixes"] == [fix], said[-3000:]
        return
    assert doctor.returncode == 0, said[-3000:]
    report = json.loads(doctor.stdout)
    assert report["exit_status"] == 0
    if DIST_INFO and not relative.endswith("/RECORD"):  # RECORD lists the others' hashes
        (files,) = [f for f in report["findings"] if f["check"] == "installed files"]
        if not damaged:
            assert files["status"] == "ok", files
            return
        assert files["status"] == "degraded" and path in files["message"], files
        # direct_url.json damaged: where pip installed it from is unknown, so the index's
        if relative.endswith("/direct_url.json"):
            index = matrix().reinstall_command(record.installed_version(PACKAGE), BUILD.variant)
            assert files["fix"] == [index]
        else:  # pip's way in may change where the damage is the .dist-info's (cured above)
            assert files["fix"][0] in reinstalls(site), files


@pytest.mark.slow
@pytest.mark.parametrize(
    ("relative", "how"),
    [(f, how) for f in CASES if f in LIBRARIES for how in DAMAGES] + LIBRARY_CASES,
)
def test_a_damaged_library_without_record_is_refused(pristine, cure, warm, tmp_path, relative, how):
    """The package alone, no dist-info (a vendored copy, a Docker COPY of site-packages'
    wheelops folder): a library's identity is the sha256 its build recorded. A library this
    import loads is refused by name with the reinstall fix, exit 1, never a signal (a
    sibling library in its place aborted the process: every op registered twice); one it
    does not load (another CUDA major's) leaves import working, and the doctor names it."""
    how_to_run = unreadable_runner() if how == "unreadable" else {}
    site = cure.take() if cure else tmp_path / "site"
    shutil.copytree(pristine / "wheelops", site / "wheelops", copy_function=os.link)
    damage(site, relative, how)
    path = str(site / relative)

    imported, doctor = run_both(warm, site, how_to_run)
    said = doctor.stdout + doctor.stderr
    report = json.loads(doctor.stdout)
    if Path(relative).name not in served_libraries():
        assert imported.returncode == 0 and "WORKS" in imported.stdout, imported.stderr[-3000:]
        assert doctor.returncode == 0 and report["verdict"] == "degraded", said[-3000:]
        (files,) = [f for f in report["findings"] if f["check"] == "installed files"]
        assert path in files["message"] and files["fix"] == [FIX_WITHOUT_DIST_INFO], files
    else:
        assert "WORKS" not in imported.stdout and imported.returncode == 1, imported.stderr[-3000:]
        error = last_error(imported.stderr)
        assert error.startswith(("wheelops.CompatibilityError", "wheelops.DamagedInstallError")), (
            imported.stderr[-3000:]
        )
        assert path in error and FIX_WITHOUT_DIST_INFO in error, error
        assert doctor.returncode == 1 and path in said, said[-3000:]
        assert report["exit_status"] == 1
    if cure is not None and cure.needed(FIX_WITHOUT_DIST_INFO, relative, how):
        cure(FIX_WITHOUT_DIST_INFO, how_to_run, pristine)  # no .dist-info claims the package


def test_every_file_of_the_install_is_a_case():
    assert {"wheelops/__init__.py", "wheelops/_build_info.json"} <= {*FILES}
    assert any(f.endswith("_ops_cpu.abi3.so") for f in FILES)
    assert len(sample(FILES)) == (3 if loader.loaded().cuda else 2)
    assert LIBRARY_CASES and all(relative in LIBRARIES for relative, _ in LIBRARY_CASES)
    assert isinstance(BUILD, BuildInfo)
    # Each library's identity without RECORD: the build recorded every library's sha256.
    assert BUILD.library_sha256 is not None
    assert sorted(BUILD.library_sha256) == sorted(f.removeprefix("wheelops/") for f in LIBRARIES)


@pytest.mark.slow
def test_a_wheel_whose_record_does_not_match_installs_and_the_doctor_names_it(warm, tmp_path):
    """pip installs a wheel whose files differ from its RECORD without a word (it does not
    check the hashes); the doctor reads the installed files back and names the one."""
    wheelhouse = os.environ.get("WHEELOPS_TEST_WHEELHOUSE")
    # This machine's: the wheelhouse may hold a cross-built platform's too (universal-aarch64).
    pattern = f"wheelops-*+{BUILD.variant}-*_{os.uname().machine}.whl"
    wheels = sorted(Path(wheelhouse).rglob(pattern)) if wheelhouse else []
    if not wheels:
        pytest.skip(f"needs the {BUILD.variant} wheel in WHEELOPS_TEST_WHEELHOUSE (nox sets it)")
    tampered = tmp_path / wheels[0].name
    with zipfile.ZipFile(wheels[0]) as source, zipfile.ZipFile(tampered, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "wheelops/_compat/cmake.py":  # neither import nor doctor reads it
                data += b"\n# changed after the wheel was built\n"
            target.writestr(info, data)
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--target", str(site), str(tampered)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    imported, doctor = run_both(warm, site, {})
    assert "WORKS" in imported.stdout, imported.stderr[-2000:]
    assert doctor.returncode == 0, doctor.stderr[-2000:]
    (files,) = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "installed files"]
    assert files["status"] == "degraded" and files["runtime"] == "1 differ", files
    assert f"{site / 'wheelops' / '_compat' / 'cmake.py'} is changed" in files["message"], files
