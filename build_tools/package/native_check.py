"""Check a wheel's native libraries from their files, on any host (a cross-built wheel too).

    python -m build_tools.package.native_check dist/repaired/universal-aarch64/wheelops-*.whl

Every ELF file is built for the wheel's platform (its tag's machine); each library needs
only what the user's torch wheel, NVIDIA's runtime wheels of its CUDA major and the
manylinux system provide (NEEDED); each CUDA library holds exactly the SASS and PTX
its build facts list (read with cuobjdump, which reads libraries of any host). The
repair step runs it after auditwheel and abi3audit (build_tools/package/repair.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from build_tools.compat import elf, links

# Provided by torch's wheels (its core libraries: never libtorch_cuda / libc10_cuda).
TORCH_LIBRARIES = {"libc10.so", "libtorch_cpu.so"}
# Provided by NVIDIA's runtime wheels that torch's CUDA builds install, per CUDA major.
CUDA_LIBRARIES = ("libcudart.so.{major}", "libcublasLt.so.{major}")
# The optional accelerator (wheelops/_accel/torch2_11_0/..., DESIGN.md 13) also binds torch's
# Python bindings: it is loaded only under the torch it was built for, by that torch's Python.
ACCELERATOR_LIBRARIES = {"libtorch_python.so"}
# The manylinux system (glibc, the C++ runtime) of either platform.
SYSTEM_LIBRARIES = {
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}


def _machine_of_tag(wheel: Path) -> str:
    tag = wheel.name.removesuffix(".whl").split("-")[-1]
    return next(m for m in ("x86_64", "aarch64") if tag.endswith(m))


def _cuobjdump() -> str | None:
    """PyPI's nvidia-cuda-cuobjdump (nox's repair session installs it), else PATH's."""
    spec = importlib.util.find_spec("nvidia")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for found in sorted(Path(folder).glob("cu*/bin/cuobjdump")):
            return str(found)
    return shutil.which("cuobjdump")


def _device_archs(cuobjdump: str, library: Path, kind: str) -> set[str]:
    out = subprocess.run(
        [cuobjdump, f"--list-{kind}", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return {f"{major}.{minor}" for major, minor in re.findall(r"sm_(\d+)(\d)a?\b", out)}


def problems(wheel: Path) -> list[str]:
    """What is wrong with the wheel's native libraries (empty: nothing)."""
    machine = _machine_of_tag(wheel)
    found: list[str] = []
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(wheel) as archive:
        archive.extractall(scratch)
        root = Path(scratch)
        facts = json.loads((root / "wheelops" / "_build_info.json").read_text())
        majors = {lib["file"]: lib["cuda_version"].split(".")[0] for lib in facts["cuda_libraries"]}
        files = [p for p in root.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
        if not files:
            found.append(f"{wheel.name} holds no native library")
        for path in files:
            name = path.relative_to(root)
            built_for = elf.machine_name(int.from_bytes(path.read_bytes()[18:20], "little"))
            if built_for != machine:
                found.append(f"{name} is built for {built_for}, the wheel is {machine}")
                continue
            allowed = TORCH_LIBRARIES | SYSTEM_LIBRARIES
            if name.parts[:2] == ("wheelops", "_accel"):
                allowed |= ACCELERATOR_LIBRARIES
            if path.name in majors:
                allowed |= {lib.format(major=majors[path.name]) for lib in CUDA_LIBRARIES}
            extra = [lib for lib in links.link_facts(path).needed if lib not in allowed]
            if extra:
                found.append(f"{name} needs {extra}, which neither torch nor NVIDIA provide")
        cuobjdump = _cuobjdump()
        for lib in facts["cuda_libraries"]:
            path = root / "wheelops" / lib["file"]
            if cuobjdump is None:
                found.append("no cuobjdump to read the SASS and PTX (nvidia-cuda-cuobjdump)")
                break
            for kind, claimed in (("elf", lib["sass_archs"]), ("ptx", lib["ptx_archs"])):
                held = _device_archs(cuobjdump, path, kind)
                if held != set(claimed):
                    found.append(f"{lib['file']} holds {kind} {sorted(held)}, facts: {claimed}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.package.native_check", description=__doc__
    )
    parser.add_argument("wheel", type=Path)
    args = parser.parse_args(argv)
    found = problems(args.wheel)
    for problem in found:
        print(f"{args.wheel.name}: {problem}", file=sys.stderr)
    if not found:
        print(f"native libraries checked: {args.wheel.name}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
