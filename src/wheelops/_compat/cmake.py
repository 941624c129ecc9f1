"""What a C++ program that builds against a Torch install may load: the policy's answer,
for `find_package(wheelops)`.

wheelopsConfig.cmake runs this as `python -m _compat.cmake` with the wheelops folder on
PYTHONPATH, so that this folder imports as a package of its own without importing
wheelops or torch, with the root of the Torch that `find_package(Torch)` found. The same
`evaluate` as import decides, over that Torch's facts (read from its files) instead of
this process's: a C++ program loads the CPU library and the CUDA library of its Torch's
CUDA major, under the same rules. It writes CMake `set()` lines for the accepted
libraries, or prints the refusal and exits 1.
"""

from __future__ import annotations

import sys

# CMake found whichever python3 comes first: an older one cannot parse the core, so say
# so, and how to pass another, before importing it.
if sys.version_info < (3, 10):  # noqa: UP036
    sys.exit(
        f"wheelops: reading the build facts needs Python >= 3.10, not {sys.version.split()[0]};"
        " pass -DWHEELOPS_PYTHON=/path/to/python3"
    )

import argparse
from pathlib import Path

from .facts import BuildInfo, torch_install
from .loader import finding_lines, installed, library_files
from .matrix import matrix
from .policy import Inputs, evaluate
from .report import Report, Status


def report_for(torch_root: Path) -> Report:
    build, cpu, cuda = installed()
    inputs = Inputs(build, files=library_files(cpu, cuda))
    return evaluate(inputs, torch_install(torch_root), matrix())


def _cmake_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def cmake_settings(report: Report) -> str:
    """The variables wheelopsConfig.cmake exports, and a warning per degraded finding."""
    assert isinstance(report.build, BuildInfo)
    paths = {c.role: c.path for c in report.to_load}
    cuda = next((path for role, path in paths.items() if role != "cpu"), "")
    values = {
        "wheelops_VERSION": report.build.wheelops_version,
        "wheelops_VARIANT": report.build.variant,
        "wheelops_CPU_LIBRARY": paths["cpu"],
        "wheelops_CUDA_LIBRARY": cuda,
        "wheelops_LIBRARIES": ";".join(paths.values()),
    }
    lines = [f"set({name} {_cmake_string(value)})" for name, value in values.items()]
    for finding in report.findings:
        if finding.status is Status.DEGRADED:
            text = "\n".join(["wheelops:", *finding_lines(finding)])
            lines.append(f"message(WARNING {_cmake_string(text)})")
    return "\n".join(lines) + "\n"


def refusal(report: Report, torch_root: Path) -> str:
    fatal = [f for f in report.findings if f.status is Status.FATAL]
    lines = [
        f"wheelops cannot serve the Torch at {torch_root} ({report.runtime.describe_torch()}):"
    ]
    for finding in fatal:
        lines += ["", *finding_lines(finding)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--torch-root",
        type=Path,
        required=True,
        help="the Torch install: <site-packages>/torch or a LibTorch folder",
    )
    parser.add_argument("--out", type=Path, required=True, help="the CMake file to write")
    args = parser.parse_args(argv)
    try:
        report = report_for(args.torch_root)
    except ValueError as err:
        print(f"wheelops: {err}")
        return 1
    if report.exit_status:
        print(refusal(report, args.torch_root))
        return 1
    args.out.write_text(cmake_settings(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
