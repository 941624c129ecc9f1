"""Read a shared library's ELF headers without loading it.

Before dlopen: a library built for another CPU is reported by glibc as "cannot
open shared object file: No such file or directory", and a truncated one can
crash the process with SIGBUS while it is mapped. Reading the headers first
turns both into plain findings. What a library links and defines is links.py's.
"""

from __future__ import annotations

import os
import platform
import struct
from pathlib import Path
from typing import BinaryIO

_MAGIC = b"\x7fELF"
_PT_LOAD = 1
_MACHINES = {
    3: "i386",
    8: "mips",
    20: "ppc",
    21: "ppc64le",
    22: "s390x",
    40: "arm",
    62: "x86_64",
    183: "aarch64",
    243: "riscv64",
}
_HOST_ALIASES = {"amd64": "x86_64", "arm64": "aarch64", "ppc64": "ppc64le"}


def host_machine() -> str:
    machine = platform.machine().lower()
    return _HOST_ALIASES.get(machine, machine)


def machine_name(code: int) -> str:
    return _MACHINES.get(code, f"machine type {code}")


def _read_at(file: BinaryIO, offset: int, size: int) -> bytes:
    file.seek(offset)
    return file.read(size)


def problem(path: Path) -> str | None:
    """Why `path` cannot be a loadable 64-bit little-endian library for this machine, or None.

    Reads the headers only, not the whole file.
    """
    try:
        with path.open("rb") as file:
            return _header_problem(path, file, os.fstat(file.fileno()).st_size)
    except FileNotFoundError:
        return f"{path} does not exist"
    except OSError as err:
        return f"{path} cannot be read: {err.strerror}"


def _header_problem(path: Path, file: BinaryIO, size: int) -> str | None:
    header = _read_at(file, 0, 64)
    if len(header) < 64 or header[:4] != _MAGIC:
        kind = "is empty" if not size else f"is not an ELF shared library ({size} bytes)"
        return f"{path} {kind}"
    if header[4] != 2:
        return f"{path} is a 32-bit library; this Python is 64-bit"
    if header[5] != 1:
        return f"{path} is big-endian; this machine is little-endian"
    (e_machine,) = struct.unpack_from("<H", header, 18)
    built_for, host = machine_name(e_machine), host_machine()
    if built_for != host:
        return f"{path} was built for {built_for}; this machine is {host}"
    phoff, shoff = struct.unpack_from("<QQ", header, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", header, 54)
    needed = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    if needed <= size:
        table = _read_at(file, phoff, phentsize * phnum)
        for i in range(phnum):
            p_type, _, p_offset, _, _, p_filesz = struct.unpack_from(
                "<IIQQQQ", table, i * phentsize
            )
            if p_type == _PT_LOAD:
                needed = max(needed, p_offset + p_filesz)
    if needed > size:
        return f"{path} is truncated: {size} bytes, its headers describe {needed}"
    return None
