"""The guard's errors, its off switch, and the GPU check at the first CUDA call per device.

`import wheelops` never touches the GPU: the architecture check runs when a
CUDA tensor first reaches a wheelops op on a device, and its verdict is
cached per device, so later calls pay one set lookup.
"""

from __future__ import annotations

import os
import threading

from wheelops._policy import Finding, Severity, gpu_finding

SKIP_ENV = "WHEELOPS_SKIP_GUARD"
DOCTOR = "python -m wheelops"


def enabled() -> bool:
    """False when WHEELOPS_SKIP_GUARD=1: experts who know better than the checks."""
    return os.environ.get(SKIP_ENV, "") not in ("1", "true", "yes")


class CompatibilityError(ImportError):
    """This wheelops install cannot serve this Python / torch / CUDA / machine."""


class UnsupportedGPUError(RuntimeError):
    """This wheelops build holds no kernel image that the GPU can run."""


# Tracebacks name them as users import them: wheelops.CompatibilityError.
CompatibilityError.__module__ = UnsupportedGPUError.__module__ = "wheelops"


def format_findings(headline: str, findings: list[Finding]) -> str:
    lines = [headline]
    for finding in findings:
        lines += [
            "",
            f"{finding.check}: {finding.message}",
            f"  build: {finding.build}",
            f"  here:  {finding.runtime}",
        ]
        if finding.fix:
            lines.append(f"  fix:   {finding.fix}")
    lines += [
        "",
        f"`{DOCTOR}` prints the whole report. {SKIP_ENV}=1 skips these checks (for experts: "
        "a real mismatch then fails later and less clearly).",
    ]
    return "\n".join(lines)


_covered_devices: set[int] = set()
_refusals: dict[int, str] = {}
_lock = threading.Lock()


def check_device(op: str, index: int) -> None:
    """Raise UnsupportedGPUError before a launch on a GPU the build cannot run on."""
    if index in _covered_devices:
        return
    with _lock:
        if index not in _covered_devices and index not in _refusals:
            _decide(index)
    if index in _refusals:
        raise UnsupportedGPUError(f"wheelops.{op}: {_refusals[index]}")


def _decide(index: int) -> None:
    from wheelops._build_info import build_info
    from wheelops._runtime_facts import gpu, this_process

    if not enabled():
        _covered_devices.add(index)
        return
    try:
        device = gpu(index)
    except (RuntimeError, AssertionError):
        return  # no such GPU in this process (fake tensors): a real launch would say so
    finding = gpu_finding(build_info(), this_process(), device)
    if finding.severity is Severity.OK:
        _covered_devices.add(index)
    else:
        _refusals[index] = format_findings(
            f"no kernel for cuda:{index} in this wheelops build.", [finding]
        )
