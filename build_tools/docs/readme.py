"""The generated tables of the docs: compatibility (from src/wheelops/matrix.json) in the README,
troubleshooting (the guard's own findings, build_tools/docs/troubleshooting.py) in
docs/troubleshooting.md, and the README's index of those.

python -m build_tools.docs.readme          # rewrite the tables between their markers
python -m build_tools.docs.readme --check  # exit 1 if a page is out of date (a test runs this)
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from build_tools import ROOT
from build_tools.compat import archs as _archs
from build_tools.docs import troubleshooting
from build_tools.plan import matrix as build_matrix
from build_tools.plan.matrix import wheels as build_wheels
from build_tools.plan.torch_install import NEWEST
from build_tools.run import steps

REPO = ROOT
README = REPO / "README.md"
TROUBLESHOOTING = REPO / "docs" / "troubleshooting.md"
CI_SCRIPT = REPO / ".ci" / "run"  # the README's test command (a test checks)

# Representative GPUs per compute capability, for people who know their GPU's name.
GPUS = {
    (5, 0): "Maxwell (GTX 750)",
    (6, 0): "P100",
    (6, 1): "GTX 10xx, P40",
    (7, 0): "V100",
    (7, 5): "T4, RTX 20xx",
    (8, 0): "A100, A30",
    (8, 6): "A10, A40, RTX 30xx",
    (8, 9): "L4, L40S, RTX 40xx",
    (9, 0): "H100, H200, GH200",
    (10, 0): "B200, GB200",
    (10, 3): "B300, GB300",
    (11, 0): "Jetson Thor (JetPack 7)",
    (12, 0): "RTX 50xx, RTX PRO 6000",
    (12, 1): "DGX Spark (GB10)",
}


def _install(matrix: build_matrix.Matrix, name: str, index_url: str) -> str:
    if name == matrix.pypi_variant:
        return "`pip install wheelops`"
    return f"`pip install wheelops --index-url {index_url}/{name}`"


def ci_rows(script: Path = CI_SCRIPT) -> tuple[list[str], bool]:
    """The rows (nox targets) .ci/run's `nox -s e2e` runs, and whether with --quick."""
    command = script.read_text().strip().splitlines()[-1]
    match = re.search(r"\be2e -- ([^&;|]*)", command)
    words = match.group(1).split() if match else []
    return [w for w in words if not w.startswith("-")], "--quick" in words


def tested_here(matrix: build_matrix.Matrix, v: build_matrix.Variant) -> str:
    """What CI here builds and tests of a variant, per platform (from .ci/run)."""
    rows, quick = ci_rows()
    cells = []
    if v.name in rows:
        torches = [
            "the newest on PyPI when CI runs" if t == NEWEST else t
            for t in build_matrix.e2e_torches(matrix, v, quick)
        ]
        # build_tools/run/rows.py tests_of_cell: under --quick with a CUDA-carrying row, a
        # CPU-only torch's cell runs the wheel's own test files, the other cells the suite.
        named = [matrix.variant(r) for r in rows if r in matrix.names]
        cuda_rows = [r for r in named if build_matrix.has_cuda(r)]
        wheel_tests = (
            f"{len(build_matrix.WHEEL_TESTS)} wheel test files: {build_matrix.WHEEL_TESTS_SAID}"
        )
        what = "the suite"
        if quick and cuda_rows:
            cpu_cells = f"the suite; under a CPU-only torch, {wheel_tests}"
            what = cpu_cells if build_matrix.has_cuda(v) else wheel_tests
        cells.append(f"{build_matrix.this_platform()}: {', '.join(torches)} ({what})")
    for platform in v.cross:
        if f"{v.name}-{platform}" in rows:
            torches = steps.emulated_torches(v.cross_torch(platform), quick)
            said = {steps.EMULATED_SUBSET: "CPU subset", steps.EMULATED_LOADING: "loading tests"}
            each = [
                f"{t}: import, doctor, {said[steps.emulated_tests(t, torches)]}" for t in torches
            ]
            cells.append(f"{platform} (cross-built here, emulated, no GPU): {'; '.join(each)}")
    if cells and quick and build_matrix.has_cuda(v):
        cells.append("(`--quick`: one CUDA arch built, not the lists above)")
    return "<br>".join(cells) or "not built here"


def variants_table(matrix: build_matrix.Matrix, index_url: str) -> str:
    rows = [
        "| variant | for torch built with | toolkit | GPU code (SASS; PTX) | built and tested "
        "by CI here (`.ci/run`) | release workflow plans (checked statically, never run) "
        "| install |",
        "|---|---|---|---|---|---|---|",
    ]
    sources = {"pypi": "PyPI", "image": "image", "debian": "Debian"}

    def code_of(arch_list: str) -> str:
        archs = _archs.parse_arch_list(arch_list)
        return f"{', '.join(archs.sass)}; {', '.join(archs.ptx) or 'none'}"

    def described(v: build_matrix.Variant) -> tuple[str, str, str]:
        if v.parts:
            parts = [described(matrix.variant(name)) for name in v.parts]
            native = ", ".join(p for p in v.platforms if p not in v.cross)
            code = [
                f"{native + ', ' if v.cross else ''}CUDA {matrix.variant(name).cuda}: {part_code}"
                for name, (_, _, part_code) in zip(v.parts, parts, strict=True)
            ]
            for platform in v.cross:  # the platform's own lists, where it has them
                code += [
                    f"{platform}, CUDA {matrix.variant(name).cuda}: {code_of(spec)}"
                    for name in v.parts
                    if (spec := v.part_arch_list(name, platform))
                ]
            majors = " or ".join(matrix.variant(n).cuda or "" for n in v.parts)
            gpus = f"any: CPU, or CUDA {majors} (the library of torch's CUDA major loads)"
            return gpus, "<br>".join(toolkit for _, toolkit, _ in parts), "<br>".join(code)
        if not v.arch_list:
            return "CPU only (any torch)", "-", "-"
        code = code_of(v.arch_list)
        return f"CUDA {v.cuda}", f"{v.toolkit} ({sources[v.toolkit_source or '']})", code

    for v in build_wheels(matrix):
        cuda, toolkit, code = described(v)
        install = _install(matrix, v.name, index_url)
        plan = f"{', '.join(v.platforms)}: torch {', '.join(v.torch)}"
        rows.append(
            f"| `{v.name}` | {cuda} | {toolkit} | {code} "
            f"| {tested_here(matrix, v)} | {plan} | {install} |"
        )
    return "\n".join(rows)


def gpu_table(matrix: build_matrix.Matrix) -> str:
    def holder(part: str) -> str:  # "in `universal`, x86_64": the wheel and its platforms
        v = next(v for v in matrix.variants if part in v.parts)
        return f"in `{v.name}`, {', '.join(p for p in v.platforms if p not in v.cross)}"

    columns = [
        (f"`{v.name}`" if v.index else f"`{v.name}` ({holder(v.name)})", v.arch_list)
        for v in matrix.variants
        if v.arch_list
    ]
    columns += [  # a cross-built platform's own lists
        (f"`{part}` (in `{v.name}`, {platform})", spec)
        for v in matrix.variants
        for platform in v.cross
        for part in v.parts
        if (spec := v.part_arch_list(part, platform))
    ]
    header = "| compute capability | GPUs | " + " | ".join(name for name, _ in columns)
    rows = [header + " |", "|---|---|" + "---|" * len(columns)]
    for capability, gpus in GPUS.items():
        cells = []
        for _, arch_list in columns:
            archs = _archs.parse_arch_list(arch_list)
            kernel = _archs.kernel_for(archs.sass, archs.ptx, capability)
            cells.append(kernel.replace(" (JIT)", ", JIT") if kernel else "no")
        rows.append(f"| {capability[0]}.{capability[1]} | {gpus} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def render(matrix: build_matrix.Matrix, index_url: str) -> str:
    return (
        f"{variants_table(matrix, index_url)}\n\n"
        "Which kernel each variant runs on a GPU (the newest SASS that fits, else PTX "
        'compiled by the driver at first use; "no": the guard refuses that GPU):\n\n'
        f"{gpu_table(matrix)}"
    )


def markers(section: str) -> tuple[str, str]:
    return (
        f"<!-- {section}: begin (python -m build_tools.docs.readme) -->",
        f"<!-- {section}: end -->",
    )


def updated(text: str, section: str, body: str, page: str = "README.md") -> str:
    begin, end = markers(section)
    if begin not in text or end not in text:
        raise SystemExit(f"{page} lacks the markers {begin!r} ... {end!r}")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n\n{body}\n\n{end}{rest.split(end, 1)[1]}"


def sections() -> dict[Path, dict[str, str]]:
    """Each page's generated sections: marker name -> body."""
    matrix = build_matrix.load()
    index_link = TROUBLESHOOTING.relative_to(REPO).as_posix()
    return {
        # The published URL, not a WHEELOPS_INDEX_URL override of this shell.
        README: {
            "matrix tables": render(matrix, matrix.published_index_url),
            "troubleshooting index": troubleshooting.index(index_link),
        },
        TROUBLESHOOTING: {"troubleshooting tables": troubleshooting.render()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m build_tools.docs.readme", description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    stale = []
    for page, bodies in sections().items():
        name = page.relative_to(REPO).as_posix()
        text = page.read_text()
        new = text
        for section, body in bodies.items():
            new = updated(new, section, body, name)
        if new != text:
            stale.append(name)
            if not args.check:
                page.write_text(new)
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; run python -m build_tools.docs.readme")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
