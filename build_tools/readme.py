"""The README's generated tables: compatibility (from wheelops/matrix.json) and
troubleshooting (the guard's own findings, build_tools/troubleshooting.py).

python -m build_tools.readme          # rewrite the tables in README.md
python -m build_tools.readme --check  # exit 1 if README.md is out of date (a test runs this)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from build_tools import matrix as build_matrix
from build_tools import troubleshooting
from build_tools.compat import archs as _archs
from build_tools.matrix import wheels as build_wheels

README = Path(__file__).resolve().parent.parent / "README.md"
SECTIONS = ("matrix tables", "troubleshooting tables")

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
    (12, 0): "RTX 50xx, RTX PRO 6000",
    (12, 1): "DGX Spark (GB10)",
}


def _install(matrix: build_matrix.Matrix, name: str, index_url: str) -> str:
    if name == matrix.pypi_variant:
        return "`pip install wheelops`"
    return f"`pip install wheelops --index-url {index_url}/{name}`"


def variants_table(matrix: build_matrix.Matrix, index_url: str) -> str:
    rows = [
        "| variant | for torch built with | toolkit | GPU code (SASS; PTX) | tested with torch "
        "| platforms | install |",
        "|---|---|---|---|---|---|---|",
    ]
    sources = {"pypi": "PyPI", "image": "image", "debian": "Debian"}

    def described(v: build_matrix.Variant) -> tuple[str, str, str]:
        if v.parts:
            parts = [described(matrix.variant(name)) for name in v.parts]
            return (
                "any: CPU, or CUDA " + " or ".join(matrix.variant(n).cuda or "" for n in v.parts)
                + " (the library of torch's CUDA major loads)",
                "<br>".join(toolkit for _, toolkit, _ in parts),
                "<br>".join(
                    f"CUDA {matrix.variant(name).cuda}: {code}"
                    for name, (_, _, code) in zip(v.parts, parts, strict=True)
                ),
            )  # fmt: skip
        if not v.arch_list:
            return "CPU only (any torch)", "-", "-"
        archs = _archs.parse_arch_list(v.arch_list)
        code = f"{', '.join(archs.sass)}; {', '.join(archs.ptx) or 'none'}"
        return f"CUDA {v.cuda}", f"{v.toolkit} ({sources[v.toolkit_source or '']})", code

    for v in build_wheels(matrix):
        cuda, toolkit, code = described(v)
        install = _install(matrix, v.name, index_url)
        rows.append(
            f"| `{v.name}` | {cuda} | {toolkit} | {code} "
            f"| {', '.join(v.torch)} | {', '.join(v.platforms)} | {install} |"
        )
    return "\n".join(rows)


def gpu_table(matrix: build_matrix.Matrix) -> str:
    cuda_variants = [v for v in matrix.variants if v.arch_list]
    names = [f"`{v.name}`" if v.index else f"`{v.name}` (in `universal`)" for v in cuda_variants]
    header = "| compute capability | GPUs | " + " | ".join(names)
    rows = [header + " |", "|---|---|" + "---|" * len(cuda_variants)]
    for capability, gpus in GPUS.items():
        cells = []
        for v in cuda_variants:
            archs = _archs.parse_arch_list(v.arch_list)
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
    return f"<!-- {section}: begin (python -m build_tools.readme) -->", f"<!-- {section}: end -->"


def updated(text: str, section: str, body: str) -> str:
    begin, end = markers(section)
    if begin not in text or end not in text:
        raise SystemExit(f"README.md lacks the markers {begin!r} ... {end!r}")
    head, rest = text.split(begin, 1)
    return f"{head}{begin}\n\n{body}\n\n{end}{rest.split(end, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m build_tools.readme", description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    matrix = build_matrix.load()
    text = README.read_text()
    # The published URL, not a WHEELOPS_INDEX_URL override of this shell.
    new = updated(text, SECTIONS[0], render(matrix, matrix.published_index_url))
    new = updated(new, SECTIONS[1], troubleshooting.render())
    if args.check:
        if new != text:
            print("README.md's generated tables are out of date: run python -m build_tools.readme")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
