"""The README's compatibility tables, generated from wheelops/matrix.json.

python -m build_tools.readme          # rewrite the tables in README.md
python -m build_tools.readme --check  # exit 1 if README.md is out of date (a test runs this)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from build_tools import matrix as build_matrix
from build_tools.arch_list import load_package_module

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = (
    "<!-- matrix tables: begin (python -m build_tools.readme) -->",
    "<!-- matrix tables: end -->",
)
_archs = load_package_module("_archs")

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
    if name == matrix.default_variant:
        return "`pip install wheelops`"
    return f"`pip install wheelops --index-url {index_url}/{name}`"


def variants_table(matrix: build_matrix.Matrix, index_url: str) -> str:
    rows = [
        "| variant | for torch built with | toolkit | GPU code (SASS; PTX) | tested with torch "
        "| platforms | install |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in matrix.variants.values():
        cuda = f"CUDA {v.cuda}" if v.cuda else "CPU only (any torch)"
        if v.arch_list:
            archs = _archs.parse_arch_list(v.arch_list)
            code = f"{', '.join(archs.sass)}; {', '.join(archs.ptx) or 'none'}"
        else:
            code = "-"
        toolkit = f"{v.toolkit} ({'PyPI' if v.toolkit_source == 'pypi' else 'image'})"
        install = _install(matrix, v.name, index_url)
        rows.append(
            f"| `{v.name}` | {cuda} | {toolkit if v.toolkit else '-'} | {code} "
            f"| {', '.join(v.torch)} | {', '.join(v.platforms)} | {install} |"
        )
    return "\n".join(rows)


def gpu_table(matrix: build_matrix.Matrix) -> str:
    cuda_variants = [v for v in matrix.variants.values() if v.arch_list]
    header = "| compute capability | GPUs | " + " | ".join(f"`{v.name}`" for v in cuda_variants)
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
        f"{BEGIN}\n\n{variants_table(matrix, index_url)}\n\n"
        "Which kernel each variant runs on a GPU (the newest SASS that fits, else PTX "
        'compiled by the driver at first use; "no": the guard refuses that GPU):\n\n'
        f"{gpu_table(matrix)}\n\n{END}"
    )


def updated(text: str, tables: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"README.md lacks the markers {BEGIN!r} ... {END!r}")
    head, rest = text.split(BEGIN, 1)
    return head + tables + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m build_tools.readme", description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    import json

    index_url = json.loads(build_matrix.MATRIX_FILE.read_text())["index_url"]
    text = README.read_text()
    new = updated(text, render(build_matrix.load(), index_url))
    if args.check:
        if new != text:
            print("README.md's matrix tables are out of date: run python -m build_tools.readme")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
