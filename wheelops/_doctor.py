"""The doctor's report: build facts vs this machine, each GPU, the ops, and the fix.

`python -m wheelops` renders it as text (or JSON with --json); its exit status is
1 when this install cannot serve this machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wheelops import _guard, _native, _policy, _variants
from wheelops._policy import Finding, Severity
from wheelops._runtime_facts import (
    cuda_driver_version,
    glibc_version,
    this_process,
    visible_gpus,
)
from wheelops._version import __version__


def _driver_finding(torch_cuda: str, driver: str | None) -> Finding:
    needed = _variants.version_tuple(torch_cuda)[0]
    if driver is None:
        return Finding(
            "CUDA driver",
            Severity.DEGRADED,
            f"CUDA {torch_cuda} runtime (torch)",
            "no NVIDIA driver (libcuda.so.1) found",
            "no NVIDIA driver is installed, so no GPU can be used; CPU tensors work",
        )
    if _variants.version_tuple(driver)[0] < needed:
        return Finding(
            "CUDA driver",
            Severity.DEGRADED,
            f"CUDA {torch_cuda} runtime (torch)",
            f"driver for CUDA {driver}",
            f"the NVIDIA driver supports CUDA {driver}, older than the CUDA {torch_cuda} "
            "runtime of torch, so no GPU can be used; CPU tensors work",
            f"update the NVIDIA driver to one for CUDA {needed}.x "
            f"({'>= 580' if needed >= 13 else '>= 525'} on Linux)",
        )
    return Finding(
        "CUDA driver", Severity.OK, f"CUDA {torch_cuda} runtime", f"driver for CUDA {driver}", "ok"
    )


def _ops_table() -> list[dict[str, Any]]:
    import torch

    names = sorted(
        name for name in torch._C._dispatch_get_all_op_names() if name.startswith("wheelops::")
    )

    def has(name: str, key: str) -> bool:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))

    return [
        {"op": n.split("::", 1)[1], "cpu": has(n, "CPU"), "cuda": has(n, "CUDA")} for n in names
    ]


def collect() -> dict[str, Any]:
    load = _native.report()
    runtime = this_process()
    findings: list[Finding] = []
    build = None
    if load is None:
        findings.append(
            Finding(
                "native libraries",
                Severity.FATAL,
                "not built",
                "source checkout",
                "this is a source checkout whose native libraries are not built",
                "python -m wheelops.jit",
            )
        )
    else:
        build = load.build
        findings += load.findings
    driver = cuda_driver_version() if runtime.torch_kind == "cuda" else None
    if runtime.torch_cuda is not None and runtime.torch_kind == "cuda":
        findings.append(_driver_finding(runtime.torch_cuda, driver))
    gpus = []
    for gpu in visible_gpus():
        entry: dict[str, Any] = {
            "index": gpu.index,
            "name": gpu.name,
            "capability": gpu.capability_text,
        }
        if build is not None and build.cuda_version is not None:
            finding = _policy.gpu_finding(build, runtime, gpu)
            findings.append(finding)
            entry["covered"] = finding.severity is Severity.OK
            entry["kernel"] = finding.message if entry["covered"] else None
        gpus.append(entry)
    loaded = load is not None and load.libraries is not None
    problems = [f for f in findings if f.severity is not Severity.OK and f.fix]
    # The fix of what stops wheelops first.
    problems.sort(key=lambda f: f.severity, reverse=True)
    fixes = list(dict.fromkeys(f.fix for f in problems))
    return {
        "wheelops": {
            "version": __version__,
            "location": str(Path(__file__).resolve().parent),
            "variant": build.variant if build else None,
        },
        "verdict": str(_policy.worst(findings)),
        "build": build.to_dict() if build else None,
        "runtime": {
            **runtime.to_dict(),
            "glibc": glibc_version(),
            "cuda_driver": driver,
        },
        "findings": [f.to_dict() for f in findings],
        "gpus": gpus,
        "ops": _ops_table() if loaded else [],
        "error": str(load.error) if load is not None and load.error is not None else None,
        "fixes": fixes,
        "guard": {"enabled": _guard.enabled(), "switch": f"{_guard.SKIP_ENV}=1"},
    }


_VERDICTS = {
    "ok": "OK: this install serves this machine.",
    "degraded": "DEGRADED: this install works here, with less than it could (see below).",
    "fatal": "CANNOT SERVE this machine (see below for why and the fix).",
}


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def render(report: dict[str, Any]) -> str:
    head = report["wheelops"]
    build = report["build"]
    lines = [
        f"wheelops {head['version']} ({head['variant'] or 'unknown'} build) at {head['location']}",
        f"verdict: {_VERDICTS[report['verdict']]}",
    ]
    if build:
        lines.append(
            f"built against torch {build['torch_version']} with "
            + (
                f"CUDA {build['cuda_version']} (nvcc {build['nvcc_version']})"
                if build["cuda_version"]
                else "no CUDA"
            )
            + f", {build['compiler']}"
            + (f" ({build['cxx_runtime']})" if build.get("cxx_runtime") else "")
            + f", commit {build['git_commit'][:12]}"
        )
    runtime = report["runtime"]
    lines.append(
        f"running Python {runtime['python_version']}, "
        + (f"torch {runtime['torch_version']}" if runtime["torch_version"] else "no torch")
        + f", {runtime['machine']}, {runtime['glibc'] or 'unknown libc'}"
        + (f", driver for CUDA {runtime['cuda_driver']}" if runtime["cuda_driver"] else "")
    )
    lines += ["", "checks"]
    rows = [["check", "build", "this machine", "verdict"]]
    rows += [[f["check"], f["build"], f["runtime"], f["severity"]] for f in report["findings"]]
    lines += _table(rows)
    problems = [f for f in report["findings"] if f["severity"] != "ok"]
    for f in problems:
        lines += ["", f"{f['check']} ({f['severity']}): {f['message']}"]
        if f["fix"]:
            lines.append(f"  fix: {f['fix']}")
    lines += ["", "GPUs"]
    if not report["gpus"]:
        lines.append("  none visible to torch")
    for gpu in report["gpus"]:
        covered = gpu.get("covered")
        verdict = "" if covered is None else (gpu["kernel"] if covered else "NOT COVERED")
        lines.append(
            f"  cuda:{gpu['index']}  {gpu['name']}  compute capability {gpu['capability']}  "
            f"{verdict}".rstrip()
        )
    lines += ["", "ops (kernels registered)"]
    if report["ops"]:
        rows = [["op", "CPU", "CUDA"]] + [
            [o["op"], "yes" if o["cpu"] else "no", "yes" if o["cuda"] else "no"]
            for o in report["ops"]
        ]
        lines += _table(rows)
    else:
        lines.append("  none: the native libraries did not load")
    if report["fixes"]:
        lines += ["", "fix"] + [f"  {fix}" for fix in report["fixes"]]
    guard = report["guard"]
    lines += [
        "",
        f"guard: {'on' if guard['enabled'] else 'OFF'} ({guard['switch']} turns it off)",
    ]
    return "\n".join(lines)


def main(as_json: bool) -> int:
    report = collect()
    print(json.dumps(report, indent=2) if as_json else render(report))
    return 1 if report["verdict"] == "fatal" else 0
