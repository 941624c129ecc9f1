"""DEVELOPING.md's adding-an-op checklist holds for every op in the tree (issue #38).

The checklist is read from DEVELOPING.md itself, so that the guide and this test cannot
drift: each `- [ ]` item of "The files" names a per-op path (`<op>` standing for the op),
and every op, as the build, `wheelops.ops` and `opspecs` find them, must have it.
"""

from __future__ import annotations

import re
from pathlib import Path

import opspecs
import pytest

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "DEVELOPING.md"
if not (REPO / "csrc").is_dir():
    pytest.skip("needs the source checkout", allow_module_level=True)

NUMBERS = {"five": 5, "six": 6, "seven": 7, "eight": 8}
SOURCE_SUFFIXES = {".py", ".h", ".cpp", ".cu", ".cuh", ".sh", ".cmake", ".json", ".toml"}


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}")
    end = text.find("\n#", start + 1)
    return text[start : end if end != -1 else None]


def _items(section: str) -> list[str]:
    """Each `- [ ]` item with its indented continuation lines, as one line."""
    return [" ".join(item.split()) for item in re.split(r"^- \[ \] ", section, flags=re.M)[1:]]


FILES_HEADING = next(
    line for line in GUIDE.read_text().splitlines() if line.startswith("### The files")
)
CHECKLIST = _items(_section(GUIDE.read_text(), FILES_HEADING))
# Each item's first backticked token: the file, `<op>` standing for the op's name.
PATHS = [re.match(r"`([^`]+)`", item).group(1) for item in CHECKLIST]
HEADER = next(path for path in PATHS if path.endswith(".h"))
HEADER_ITEM = next(item for item in CHECKLIST if item.startswith(f"`{HEADER}`"))
# Where the item puts a family's header, and the namespace it names for an op's internals.
KERNELS = REPO / re.search(r"`(csrc/[\w/]+/kernels/)`", HEADER_ITEM).group(1)
NAMESPACE = re.search(r"namespace `(wheelops::<op>)`", HEADER_ITEM).group(1)
# "(families: `norm.h` for `layer_norm` and `rms_norm`)": ops whose header is their family's.
FAMILIES = {
    op: header
    for header, ops in re.findall(r"`(\w+\.h)` for ((?:`\w+`(?:, | and )?)+)", HEADER_ITEM)
    for op in re.findall(r"`(\w+)`", ops)
}


def _ops() -> list[str]:
    """Every op, found the ways the project finds them: the build (csrc/ops/*.cpp), the
    package (src/wheelops/ops/*.py) and the descriptions (opspecs); an op one of them misses
    then fails for the file it lacks."""
    found = {p.stem for p in (REPO / "csrc" / "ops").glob("*.cpp")}
    found |= {p.stem for p in (REPO / "src" / "wheelops" / "ops").glob("*.py") if p.stem[0] != "_"}
    return sorted(found | set(opspecs.NAMES))


OPS = _ops()


def _includes(source: Path, seen: set[Path] | None = None) -> set[Path]:
    """The headers `source` includes with quotes, transitively, resolved as the build
    resolves them: next to the including file, then under csrc/include."""
    seen = set() if seen is None else seen
    for name in re.findall(r'^#include "([^"]+)"', source.read_text(), re.M):
        for folder in (source.parent, REPO / "csrc" / "include"):
            header = (folder / name).resolve()
            if header.is_file() and header not in seen:
                seen.add(header)
                _includes(header, seen)
                break
    return seen


def test_the_checklist_is_read():
    heading_count = NUMBERS[FILES_HEADING.split("(")[1].split()[0]]
    assert len(PATHS) == heading_count, (FILES_HEADING, PATHS)
    assert all("<op>" in path for path in PATHS), PATHS
    assert FAMILIES, "no family named in the header's item"
    assert len(OPS) >= 11, OPS


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("path", [p for p in PATHS if p != HEADER])
def test_every_op_has_each_file_of_the_checklist(op: str, path: str):
    assert (REPO / path.replace("<op>", op)).is_file(), f"{op}: no {path}"


@pytest.mark.parametrize("op", OPS)
def test_both_libraries_include_the_ops_checks_from_its_header_or_its_familys(op: str):
    own = REPO / HEADER.replace("<op>", op)
    assert own.is_file() != (op in FAMILIES), f"{op}: own header {own.is_file()}, family?"
    header = own if own.is_file() else KERNELS / FAMILIES[op]
    name = op if own.is_file() else header.stem
    assert f"namespace {NAMESPACE.replace('<op>', name)} {{" in header.read_text(), header
    for source in (".cpp", ".cu"):
        included = _includes(REPO / "csrc" / "ops" / f"{op}{source}")
        assert header.resolve() in included, f"{op}{source} does not include {header}"


@pytest.mark.parametrize("op", OPS)
def test_every_op_has_its_test_over_2_pow_31_elements(op: str):
    # The guide's tests item names both places; test_scale's docstring table lists its ops.
    item = next(i for i in CHECKLIST if i.startswith("`tests/test_<op>.py`"))
    assert "`test_more_than_2_pow_31_elements`" in item and "`tests/test_scale.py`" in item
    own = (REPO / "tests" / f"test_{op}.py").read_text()
    scale_table = (REPO / "tests" / "test_scale.py").read_text().split('"""')[1]
    in_table = re.search(rf"^{op}\s", scale_table, re.M)
    if re.search(rf"`{op}` has none yet", item):  # a gap the guide names
        assert "def test_more_than_2_pow_31_elements(" not in own and not in_table, op
    else:
        assert "def test_more_than_2_pow_31_elements(" in own or in_table, op


def test_the_proof_op_is_named_in_the_code_only_by_its_own_files():
    # DEVELOPING.md's proof: `git grep -l <op> -- <paths>` lists only the op's own files.
    command = re.search(r"`git grep -l (\w+) -- ([^`]+)`", " ".join(GUIDE.read_text().split()))
    assert command, "DEVELOPING.md's proof command"
    op, pathspecs = command.group(1), command.group(2).replace("'", "").split()
    naming = {
        path.relative_to(REPO).as_posix()
        for spec in pathspecs
        for path in ((REPO / spec).rglob("*") if (REPO / spec).is_dir() else REPO.glob(spec))
        if path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts
        and op in path.read_text(errors="replace")
    }  # fmt: skip
    own = {path.replace("<op>", op) for path in PATHS}
    modules = {p for p in naming if p.startswith("src/wheelops/nn/")}  # its optional wrapper
    # the benchmark's peers; the tangents' derived bounds (to move into the descriptions)
    catalogs = {"benchmarks/peers.py", "tests/test_benchmarks.py", "tests/_jvp_bounds.py"}
    # the import lines of the static surface (tests/test_op_surface.py)
    catalogs |= {
        "src/wheelops/__init__.py",
        "src/wheelops/ops/__init__.py",
        "src/wheelops/nn/__init__.py",
    }
    # the optional autograd accelerator, a second implementation of the busiest ops
    catalogs |= {"accelerator/autograd_accel.cpp", "tests/test_accelerator.py"}
    # the emulated aarch64 run's test files (two ops' whole tests)
    catalogs.add("build_tools/run/steps.py")
    assert catalogs <= set(re.findall(r"`([\w/]+\.(?:py|cpp))`", proof_paragraph()))
    assert own <= naming and naming - own - catalogs == modules - catalogs, sorted(naming - own)


def proof_paragraph() -> str:
    return next(p for p in GUIDE.read_text().split("\n\n") if p.startswith("The proof:"))
