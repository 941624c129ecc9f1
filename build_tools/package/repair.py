"""Repair a built wheel to manylinux and check it: the one repair step of nox and cibuildwheel.

    python -m build_tools.package.repair dist/cu130/wheelops-*.whl dist/repaired/cu130

auditwheel retags the wheel for the matrix's manylinux policy without vendoring
anything: torch's libraries and the CUDA runtime come from the user's torch, so
bundling a second copy would load two of each. Then `auditwheel show` must
confirm the tag, `abi3audit --strict` that the libraries keep to the stable
Python ABI of cp310-abi3, `check-wheel-contents` that the layout is sound,
build_tools/package/native_check.py each library's platform, NEEDED, SASS and PTX, Quansight's
`torch-abi-audit --check torch` on the unpacked wheel (an outside check: every library on
torch's stable ABI, the torch it needs the matrix's floor; the optional accelerator, off that
ABI by design, left out: ABI_AUDIT_LEAVES_OUT), and the
CycloneDX schema that the SBOM the build wrote is valid (build_tools/package/sbom.py). A
cross-built wheel (--plat manylinux_2_28_aarch64) is repaired and checked here too:
these tools read ELF files, whatever the host.
Needs build_tools/package/repair-requirements.txt installed.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from build_tools.package import sbom
from build_tools.plan import matrix as build_matrix

# The outside stable-ABI audit (PyPI; vLLM gates on it): repair-requirements.txt and the
# test sessions install it (tests/test_build.py checks they agree).
ABI_AUDIT_REQUIREMENT = "torch-abi-audit==0.3.0"
# What the audit leaves out: the optional autograd accelerator (DESIGN.md 13,
# src/wheelops/ops/_accel.py) is off the stable ABI by design. It is built per exact torch
# version, loaded only where that version is torch's own, and the stable-ABI layer serves
# everywhere else, so the wheel's promise (every torch >= the floor) never rests on it.
ABI_AUDIT_LEAVES_OUT = "wheelops/_accel/torch*/wheelops_accel.abi3.so"

# Provided at run time by torch (and the CUDA runtime it depends on): never vendored.
EXCLUDED_LIBRARIES = (
    "libtorch*.so*",
    "libc10*.so*",
    "libshm*.so*",
    "libcudart.so*",
    "libcuda.so*",
    "libnvrtc*.so*",
    "libcublas*.so*",
)


def _run(*args: str) -> str:
    print("+", " ".join(args), flush=True)
    done = subprocess.run(args, capture_output=True, text=True)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"{args[0]} {args[1] if len(args) > 1 else ''} failed:\n{output}")
    print(output.strip(), flush=True)
    return output


def repair(wheel: Path, dest: Path, plat: str) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    # auditwheel offers --plat only for this machine's architecture; for a cross-built
    # wheel it takes the architecture from the file name and, with "auto", tags the
    # oldest policy the libraries satisfy. That tag's glibc must be within `plat`'s
    # (check, below), and `plat`, the matrix's policy, joins it (as auditwheel's own
    # --plat does: manylinux_2_27_x86_64.manylinux_2_28_x86_64).
    cross = not plat.endswith("_" + build_matrix.this_platform())
    with tempfile.TemporaryDirectory() as scratch:
        excludes = [f"--exclude={pattern}" for pattern in EXCLUDED_LIBRARIES]
        auditwheel = [sys.executable, "-m", "auditwheel", "repair"]
        policy = f"--plat={'auto' if cross else plat}"
        _run(*auditwheel, policy, *excludes, f"--wheel-dir={scratch}", str(wheel))
        (repaired,) = Path(scratch).glob("*.whl")
        if cross and plat not in repaired.name:
            found = [_glibc_of(tag) for tag in re.findall(r"manylinux_\d+_\d+_\w+", repaired.name)]
            if not found or max(found) > _glibc_of(plat):
                raise SystemExit(f"auditwheel tagged {repaired.name}, beyond {plat}")
            tags = [sys.executable, "-m", "wheel", "tags", "--remove"]
            _run(*tags, f"--platform-tag=+{plat}", str(repaired))
            (repaired,) = Path(scratch).glob("*.whl")
        target = dest / repaired.name
        target.unlink(missing_ok=True)
        repaired.replace(target)
    check(target, plat)
    return target


def check(wheel: Path, plat: str) -> None:
    show = _run(sys.executable, "-m", "auditwheel", "show", str(wheel))
    # The glibc the libraries' versioned symbols need must be within the policy's.
    wanted = _glibc_of(plat)
    needed = [_glibc_of(tag) for tag in re.findall(r'"(manylinux_\d+_\d+_\w+)"', show)]
    if plat not in wheel.name or not needed or max(needed) > wanted:
        raise SystemExit(f"auditwheel show does not confirm {plat} for {wheel.name}:\n{show}")
    vendored = re.search(r"\.libs/|wheelops\.libs", "\n".join(_wheel_names(wheel)))
    if vendored:
        raise SystemExit(f"{wheel.name} vendors shared libraries; it must not:\n{show}")
    _check_library_hashes(wheel)
    _run(sys.executable, "-m", "abi3audit", "--strict", "--verbose", str(wheel))
    _run(sys.executable, "-m", "check_wheel_contents", str(wheel))
    _run(sys.executable, "-m", "build_tools.package.native_check", str(wheel))
    problems = abi_audit_problems(
        torch_abi_audit_wheel(wheel), build_matrix.torch_floor(build_matrix.load())
    )
    if problems:
        raise SystemExit(f"torch-abi-audit: {wheel.name}: " + "; ".join(problems))
    try:
        sbom.validate(sbom.read(wheel))
    except sbom.SbomError as err:
        raise SystemExit(f"{wheel.name}: {err}") from None
    print(f"repaired and checked: {wheel} (its SBOM is valid CycloneDX {sbom.SPEC_VERSION})")


def torch_abi_audit_wheel(wheel: Path) -> dict:
    """The audit's report on the unpacked wheel, every library but ABI_AUDIT_LEAVES_OUT's."""
    import zipfile

    with tempfile.TemporaryDirectory() as unpacked:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(unpacked)
        for left_out in Path(unpacked).glob(ABI_AUDIT_LEAVES_OUT):
            left_out.unlink()
        return torch_abi_audit(Path(unpacked))


def torch_abi_audit(folder: Path) -> dict:
    """`torch-abi-audit <folder> --check torch --json`: its report (SystemExit where it
    fails the check or cannot run)."""
    import json
    import shutil

    tool = shutil.which("torch-abi-audit") or str(Path(sys.executable).with_name("torch-abi-audit"))
    output = _run(tool, str(folder), "--check", "torch", "--json")
    return json.loads(output[output.index("{") :])


def abi_audit_problems(report: dict, floor: str) -> list[str]:
    """What the audit's report says is wrong: a library off torch's stable ABI, or one that
    needs a torch other than the floor (the wheel promises every torch >= the floor; a
    higher minimum breaks that, a lower one means the build's TORCH_TARGET_VERSION drifted)."""
    libraries = [*report.get("bundled_libs", []), *report.get("extensions", [])]
    problems = [] if libraries else ["it found no native library"]
    for lib in libraries:
        name, torch = Path(lib["path"]).name, lib.get("torch") or {}
        if lib.get("error"):
            problems.append(f"{name}: {lib['error']}")
        elif not torch.get("stable") or torch.get("unstable_symbols"):
            problems.append(f"{name} uses torch's unstable ABI: {torch.get('unstable_symbols')}")
        elif torch.get("min_torch_version") != floor:
            problems.append(f"{name} needs torch {torch.get('min_torch_version')}, not {floor}")
    return problems


def _check_library_hashes(wheel: Path) -> None:
    """Each library is the file its build hashed into the build facts: the installed guard
    knows a library by that hash where no RECORD is installed, so a repair step that
    rewrote one (auditwheel patching an RPATH, a strip) must record it again."""
    import hashlib
    import json
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        facts = json.loads(archive.read("wheelops/_build_info.json"))
        recorded = facts.get("library_sha256") or {}
        found = {
            name.removeprefix("wheelops/"): hashlib.sha256(archive.read(name)).hexdigest()
            for name in archive.namelist()
            if name.startswith("wheelops/") and name.endswith(".so")
        }
    if found != recorded:
        raise SystemExit(
            f"{wheel.name}: its libraries' sha256 {found} are not the build facts' {recorded}"
        )


def _glibc_of(tag: str) -> tuple[int, int]:
    major, minor = re.match(r"manylinux_(\d+)_(\d+)_", tag).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def _wheel_names(wheel: Path) -> list[str]:
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.package.repair", description=__doc__
    )
    parser.add_argument("wheel", type=Path)
    parser.add_argument("dest", type=Path)
    arch = platform.machine()
    parser.add_argument("--plat", default=build_matrix.load().manylinux_tag(arch))
    args = parser.parse_args(argv)
    repair(args.wheel, args.dest, args.plat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
