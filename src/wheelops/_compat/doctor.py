"""`python -m wheelops`: render the policy's report as text or JSON. No decisions here.

The report is import's own (the same `evaluate` over the same facts), with the
driver and every GPU added; its exit status is 1 exactly when import raises.
"""

from __future__ import annotations

import json
from typing import Any

from . import loader
from .facts import BuildInfo, this_process
from .probes import (
    Gpu,
    cublaslt_loaded,
    cuda_driver_version,
    cxx_compilers,
    glibc_version,
    visible_gpus,
)
from .report import Finding, Status


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


def collect(
    version: str, import_error: BaseException | None = None, accelerator: str | None = None
) -> dict[str, Any]:
    """`import_error`: what stopped `import wheelops` after the guard let it go on (a
    damaged module, say): the report is then fatal, as the import was. `accelerator`: the
    optional C++ accelerator's state, where the ops could be used (python -m wheelops)."""
    kind = this_process().torch_kind
    gpus = visible_gpus() if kind == "cuda" else []
    driver = cuda_driver_version() if kind == "cuda" else None
    failure = None if import_error is None else f"{type(import_error).__name__}: {import_error}"
    # torch's run-time compiler, for AOTInductor packages: only where torch is (0.2 s).
    compilers = cxx_compilers() if kind != "missing" else None
    report = loader.report_with_devices(
        gpus, driver, import_failure=failure, compilers=compilers, accelerator=accelerator
    )
    build = report.build if isinstance(report.build, BuildInfo) else None
    state = loader.state()
    serving = state.loaded.cuda_info if state.loaded else None
    return {
        "wheelops": {
            "version": version,
            "location": str(loader.PACKAGE_DIR),
            "variant": build.variant if build else None,
        },
        "verdict": str(report.verdict),
        "exit_status": report.exit_status,
        "build": build.to_dict() if build else None,
        "runtime": {
            **report.runtime.to_dict(),
            "glibc": glibc_version(),
            "cuda_driver": driver,
            # The serving CUDA library's GEMMs: cuBLASLt as built, and as loaded (torch's).
            "cublaslt": {
                "built": serving.cublaslt_version,
                "loaded": cublaslt_loaded(serving.major),
            }
            if serving and serving.cublaslt_version
            else None,
        },
        "libraries": [c.to_dict() for c in report.candidates],
        "findings": [f.to_dict() for f in report.findings],
        "gpus": [_gpu_entry(gpu, report.finding(f"GPU cuda:{gpu.index}")) for gpu in gpus],
        "ops": _ops_table() if state.loaded is not None else [],
        "error": str(state.error) if state.error is not None else None,
        "fixes": report.fixes,
        "cpp": {
            "cmake_prefix_path": str(loader.CMAKE_PREFIX),
            "library_paths": loader.library_paths(),
        },
        "guard": {"enabled": loader.guard_enabled(), "switch": f"{loader.SKIP_ENV}=1"},
    }


def _gpu_entry(gpu: Gpu, finding: Finding | None) -> dict[str, Any]:
    covered = None if finding is None else finding.status is Status.OK
    return {
        "index": gpu.index,
        "name": gpu.name,
        "capability": gpu.capability_text,
        "covered": covered,
        "kernel": finding.message.removeprefix("runs ") if finding and covered else None,
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
    head, build, runtime = report["wheelops"], report["build"], report["runtime"]
    lines = [
        f"wheelops {head['version']} ({head['variant'] or 'unknown'} build) at {head['location']}",
        f"verdict: {_VERDICTS[report['verdict']]}",
    ]
    if build:
        lines.append(
            f"built against torch {build['torch_version']} with "
            + (
                ", ".join(
                    f"CUDA {lib['cuda_version']} (nvcc {lib['nvcc_version']}, "
                    f"{lib['toolkit_origin']})"
                    for lib in build["cuda_libraries"]
                )
                or "no CUDA"
            )
            + f", {build['compiler']}"
            + (f" ({build['cxx_runtime']})" if build.get("cxx_runtime") else "")
            + f", commit {build['git_commit'][:12]}"
        )
    lines.append(
        f"running Python {runtime['python_version']}, "
        + (f"torch {runtime['torch_version']}" if runtime["torch_version"] else "no torch")
        + f", {runtime['machine']}, {runtime['glibc'] or 'unknown libc'}"
        + (f", driver for CUDA {runtime['cuda_driver']}" if runtime["cuda_driver"] else "")
    )
    if runtime.get("cublaslt"):
        blas = runtime["cublaslt"]
        lines.append(f"cuBLASLt: built with {blas['built']}, loaded {blas['loaded'] or 'none'}")
    lines += ["", "libraries"]
    for lib in report["libraries"]:
        verdict = "LOADS" if lib["accepted"] else "not loaded"
        lines.append(f"  {lib['library']:<6} {verdict}: {lib['path']}")
        lines.append(f"        {lib['reason']}")
    if not report["libraries"]:
        lines.append("  none found")
    lines += ["", "checks"]
    rows = [["check", "build", "this machine", "verdict"]]
    rows += [[f["check"], f["build"], f["runtime"], f["status"]] for f in report["findings"]]
    lines += _table(rows)
    for f in report["findings"]:
        if f["status"] != "ok":
            lines += ["", f"{f['check']} ({f['status']}): {f['message']}"]
            lines += [f"  {'fix:' if i == 0 else 'or: '} {c}" for i, c in enumerate(f["fix"])]
    lines += ["", "GPUs"]
    if not report["gpus"]:
        lines.append("  none visible to torch")
    for g in report["gpus"]:
        verdict = {None: "", True: g["kernel"], False: "NOT COVERED"}[g["covered"]]
        lines.append(
            f"  cuda:{g['index']}  {g['name']}  compute capability {g['capability']}  {verdict}"
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
        lines += ["", "fix (the first cures what stops wheelops)"]
        lines += [f"  {fix}" for fix in report["fixes"]]
    cpp = report["cpp"]
    lines += [
        "",
        "C++ programs (README: Deploy)",
        f"  CMAKE_PREFIX_PATH  {cpp['cmake_prefix_path']}  (find_package(wheelops))",
    ]
    lines += [f"  load               {path}" for path in cpp["library_paths"]]
    guard = report["guard"]
    lines += ["", f"guard: {'on' if guard['enabled'] else 'OFF'} ({guard['switch']} turns it off)"]
    return "\n".join(lines)


def main(
    version: str,
    as_json: bool,
    import_error: BaseException | None = None,
    accelerator: str | None = None,
) -> int:
    report = collect(version, import_error, accelerator)
    print(json.dumps(report, indent=2) if as_json else render(report))
    return report["exit_status"]
