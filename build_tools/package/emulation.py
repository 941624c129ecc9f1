"""Run a cross-built wheel here, under qemu-user emulation: an aarch64 CPython, venv and torch.

    python -m build_tools.package.emulation venv aarch64 DIR --torch 2.14.1 \
        [--wheel W] [--with REQ...]
    python -m build_tools.package.emulation install aarch64 DIR --index-url URL   # into that venv
    DIR/bin/python -m wheelops --json       # runs under qemu-aarch64

The sysroot is Debian bookworm's arm64 CPython 3.11 and the libraries it needs, fetched
by build_tools/plan/debian_packages.py (apt-get under a private state) and unpacked in Python.
qemu-user looks a path up in the sysroot first, so the sysroot also holds an aarch64
/proc/cpuinfo and MIDR registers (a Neoverse V2, GH200's Grace CPU): torch's cpuinfo
reads them, and the host's x86 ones crash it. No binfmt registration is needed: the
venv's `python` is a script that starts qemu (with argv[0] set to itself), so every
subprocess a test starts with sys.executable is emulated too; host programs (readelf)
run natively.

Packages come from the index by pip on this host (`--platform`, `--target` into the
venv's site-packages): pip would judge torch's requirement markers for this machine,
so torch is installed --no-deps and its runtime requirements are listed here.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from build_tools.plan import debian_packages, installer
from build_tools.plan.cross_target import PIP_PLATFORMS, compiler
from build_tools.plan.cuda12_toolkit import cache_dir, deb_data
from build_tools.plan.cuda_toolkit import ToolkitError

PYTHON = "3.11"  # Debian bookworm's CPython
DEBIAN_ARCH = {"aarch64": "arm64"}
# The sysroot: these and everything they depend on, less what a Python never runs.
DEBIAN_ROOTS = ("python3.11-minimal", "libpython3.11-stdlib", "libstdc++6", "libgomp1")
DEBIAN_SKIP = (
    "dpkg",
    "perl",
    "perl-base",
    "perl-modules-5.36",
    "libperl5.36",
    "tar",
    "install-info",
    "mailcap",
    "mime-support",
    "media-types",
)
UV_PLATFORMS = {"aarch64": "aarch64-manylinux_2_28"}  # uv's name for PIP_PLATFORMS' newest
QEMU_DEB = "qemu-user-static"  # fetched the same way (amd64) where no qemu is installed
# What torch's runtime needs beyond the torch wheel, per release (torch's own pins, for
# this platform). The CUDA 13 build links its NVIDIA libraries; the CPU build nothing.
COMMON_TORCH_REQUIREMENTS = [
    "filelock",
    "typing-extensions",
    "sympy",
    "networkx",
    "jinja2",
    "fsspec",
]
TORCH_RUNTIME = {
    "2.14.1": [
        "cuda-toolkit[cublas,cudart,cufft,cufile,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]"
        "==13.0.3",
        "nvidia-cudnn-cu13==9.24.0.43",
        "nvidia-cusparselt-cu13==0.8.1",
        "nvidia-nvshmem-cu13==3.4.5",
        # torch pins 2.30.7, which this machine's index lacks for aarch64: same soname
        "nvidia-nccl-cu13>=2.30.7,<3",
    ],
    "2.10.0": [],
}
# libtorch_cpu of the CUDA build links libcupti.so.13 (its profiler). Where no aarch64
# nvidia-cuda-cupti installs (PyPI's is tagged manylinux_2_25, which uv's aarch64-manylinux_2_28
# takes and pip's PIP_PLATFORMS list does not), a stand-in library exporting
# the symbols torch links, each failing (CUPTI_ERROR_NOT_INITIALIZED), takes its place:
# enough to import torch; profiling is not part of what the emulated runs test.
CUPTI = ("nvidia-cuda-cupti==13.0.85", "libcupti.so.13")
CUPTI_ERROR_NOT_INITIALIZED = 15
# An aarch64 CPU for torch's cpuinfo (Neoverse V2: implementer 0x41, part 0xd4f).
CPUINFO = """\
processor\t: {n}
BogoMIPS\t: 2000.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm \
jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs \
sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm \
svebf16 i8mm bf16 dgh bti
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd4f
CPU revision\t: 1

"""
MIDR_EL1 = "0x00000000410fd4f1\n"


def sysroot(machine: str) -> Path:
    """The cached sysroot with an emulated CPython (fetched once)."""
    root = cache_dir() / f"sysroot-{machine}"
    stamp = root / ".wheelops-complete"
    if stamp.is_file():
        return root
    staging = root.with_name(root.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    debs = debian_packages.fetch(
        DEBIAN_ARCH[machine], DEBIAN_ROOTS, staging.with_suffix(".debs"), skip=DEBIAN_SKIP
    )
    for deb in debs:
        with deb_data(deb) as data:
            data.extractall(staging, filter="tar")
    cpus = os.cpu_count() or 1
    (staging / "proc").mkdir()
    (staging / "proc" / "cpuinfo").write_text("".join(CPUINFO.format(n=n) for n in range(cpus)))
    for n in range(cpus):
        regs = staging / f"sys/devices/system/cpu/cpu{n}/regs/identification"
        regs.mkdir(parents=True)
        (regs / "midr_el1").write_text(MIDR_EL1)
    (staging / "etc").mkdir(exist_ok=True)
    (staging / "etc" / "ld.so.cache").write_bytes(b"")  # not the host's x86 cache
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    shutil.rmtree(staging.with_suffix(".debs"), ignore_errors=True)
    stamp.write_text("\n".join(d.name for d in debs) + "\n")
    return root


def qemu(machine: str) -> Path:
    """qemu-<machine>-static: installed, else unpacked from Debian's qemu-user-static."""
    name = f"qemu-{machine}-static"
    found = shutil.which(name)
    if found:
        return Path(found)
    unpacked = cache_dir() / "qemu" / name
    if not unpacked.is_file():
        fetched = debian_packages.fetch(
            "amd64", (QEMU_DEB,), cache_dir() / "qemu-debs", closure=False
        )
        (deb,) = [d for d in fetched if d.name.startswith(f"{QEMU_DEB}_")]
        with deb_data(deb) as data:
            member = data.extractfile(f"./usr/bin/{name}")
            if member is None:
                raise ToolkitError(f"{deb.name} has no usr/bin/{name}")
            unpacked.parent.mkdir(parents=True, exist_ok=True)
            unpacked.write_bytes(member.read())
        unpacked.chmod(0o755)
    return unpacked


def new_venv(machine: str, where: Path) -> Path:
    """A fresh venv of the emulated CPython at `where`; returns its python (a script)."""
    root, emulator = sysroot(machine), qemu(machine)
    shutil.rmtree(where, ignore_errors=True)
    python = [str(emulator), "-L", str(root), str(root / f"usr/bin/python{PYTHON}")]
    subprocess.run([*python, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    for link in where.glob("bin/python*"):
        link.unlink()
    # argv[0] is the script: sys.executable, so subprocesses come back through it.
    python.write_text(
        f'#!/bin/sh\nexec "{emulator}" -L "{root}" -0 "$0" "{root}/usr/bin/python{PYTHON}" "$@"\n'
    )
    python.chmod(python.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (where / "bin" / f"python{PYTHON}").symlink_to("python")
    (where / "bin" / "python3").symlink_to("python")
    return python


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{PYTHON}" / "site-packages"


def pip_install(machine: str, venv: Path, *args: str, isolated: bool = False) -> None:
    """Install into the emulated venv, for its platform, from this host: with the uv a nox
    session names (build_tools/plan/installer.py: a CUDA torch's runtime in a third of
    pip's time), else with this host's pip. `isolated`: no configuration is read."""
    target = str(site_packages(venv))
    uv = installer.uv()
    if uv:
        platform = ["--python-platform", UV_PLATFORMS[machine], "--python-version", PYTHON]
        command = [uv, "pip", "install", "--quiet", "--no-cache", "--only-binary", ":all:"]
        command += [*platform, "--target", target, *args]
    else:
        platforms = [f"--platform={p}" for p in PIP_PLATFORMS[machine]]
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--only-binary=:all:"]
        interpreter = [f"--python-version={PYTHON}", "--implementation=cp"]
        command = [*pip, *(["--isolated"] if isolated else []), *platforms, *interpreter]
        command += ["--target", target, "--upgrade", *args]
    print(f"+ {'uv pip' if uv else 'pip'} install (emulated {machine})", " ".join(args), flush=True)
    subprocess.run(command, check=True, env=installer.environment())


def _cupti_stand_in(machine: str, venv: Path, torch_lib: Path) -> Path:
    """A libcupti.so.13 exporting what torch's libtorch_cpu takes from it, each call failing."""
    readelf = ["readelf", "--dyn-syms", "-W", str(torch_lib / "libtorch_cpu.so")]
    symbols = subprocess.run(readelf, capture_output=True, text=True, check=True).stdout
    taken = [line for line in symbols.splitlines() if "@libcupti.so" in line and " UND " in line]
    names = sorted({line.split()[7].split("@")[0] for line in taken})
    folder = site_packages(venv) / "nvidia" / "cu13" / "lib"
    folder.mkdir(parents=True, exist_ok=True)
    source = venv / "cupti_stand_in.c"
    source.write_text(
        "".join(f"int {n}(void) {{ return {CUPTI_ERROR_NOT_INITIALIZED}; }}\n" for n in names)
    )
    script = venv / "cupti_stand_in.map"
    script.write_text(f"{CUPTI[1]} {{ global: *; }};\n")
    output = folder / CUPTI[1]
    gcc = str(compiler(machine)).replace("g++", "gcc")
    link = [f"-Wl,-soname,{CUPTI[1]}", f"-Wl,--version-script={script}"]
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(output), str(source), *link], check=True)
    print(
        f"{CUPTI[0]} has no {machine} wheel on this index: a stand-in {output.name} "
        f"({len(names)} symbols, each returning an error) takes its place",
        flush=True,
    )
    return output


def install_torch(machine: str, venv: Path, version: str) -> None:
    """PyPI's torch `version` for `machine` and what it needs to import, into `venv`."""
    if version not in TORCH_RUNTIME:
        raise SystemExit(f"no emulated runtime listed for torch {version} ({list(TORCH_RUNTIME)})")
    pip_install(machine, venv, "--no-deps", f"torch=={version}")
    pip_install(machine, venv, *COMMON_TORCH_REQUIREMENTS, *TORCH_RUNTIME[version])
    if TORCH_RUNTIME[version]:
        try:
            pip_install(machine, venv, "--no-deps", CUPTI[0])
        except subprocess.CalledProcessError:
            _cupti_stand_in(machine, venv, site_packages(venv) / "torch" / "lib")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m build_tools.package.emulation", description=__doc__
    )
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("venv", help="a fresh emulated venv with torch (and more)")
    more = sub.add_parser("install", help="install into an emulated venv")
    make.add_argument("--torch", required=True, help=f"one of {', '.join(TORCH_RUNTIME)}")
    for command in (make, more):
        command.add_argument("machine", choices=sorted(DEBIAN_ARCH))
        command.add_argument("venv", type=Path)
        command.add_argument("--wheel", type=Path, help="a wheelops wheel (--no-deps)")
        command.add_argument("--index-url", help="wheelops (--no-deps) from this index")
        more_help = "more requirements (test tools)"
        command.add_argument("--with", dest="requirements", nargs="+", default=[], help=more_help)
    args = parser.parse_args(argv)
    venv = args.venv.resolve()
    try:
        if args.command == "venv":
            new_venv(args.machine, venv)
            install_torch(args.machine, venv, args.torch)
        if args.requirements:
            pip_install(args.machine, venv, *args.requirements)
        if args.wheel:
            pip_install(args.machine, venv, "--no-deps", str(args.wheel))
        if args.index_url:  # --isolated: pip's configuration must not supply wheelops
            from_index = ["--index-url", args.index_url, "wheelops"]
            pip_install(args.machine, venv, "--no-deps", *from_index, isolated=True)
    except ToolkitError as err:
        raise SystemExit(f"wheelops emulation: {err}") from None
    print(f"emulated {args.machine} venv: {venv / 'bin' / 'python'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
