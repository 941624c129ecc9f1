"""What a shared library links dynamically and which symbols it defines, read from its ELF
sections without loading it: after a build (build_tools: the C++ runtime check, the
native check, the SBOM) and by the doctor's compiler probe; import never reads them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

_SHT_SYMTAB, _SHT_DYNAMIC, _SHT_DYNSYM = 2, 6, 11
_DT_NEEDED = 1
_SHN_UNDEF = 0


@dataclass(frozen=True)
class LinkFacts:
    """What a library needs from the loader and what it defines."""

    needed: tuple[str, ...]  # DT_NEEDED entries, in order
    defined: frozenset[str]  # symbols the library defines (.dynsym and .symtab)


def link_facts(path: Path) -> LinkFacts:
    """The NEEDED libraries and defined symbols of a 64-bit little-endian ELF library."""
    data = path.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 40)
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]

    def string(table: int, offset: int) -> str:
        start = sections[table][4] + offset
        return data[start : data.index(b"\0", start)].decode("utf-8", "replace")

    needed: list[str] = []
    defined: set[str] = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind == _SHT_DYNAMIC:
            for entry in range(offset, offset + size, entsize):
                tag, value = struct.unpack_from("<qQ", data, entry)
                if tag == _DT_NEEDED:
                    needed.append(string(link, value))
        elif kind in (_SHT_SYMTAB, _SHT_DYNSYM):
            for entry in range(offset, offset + size, entsize):
                name, _, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", data, entry)
                if name and shndx != _SHN_UNDEF:
                    defined.add(string(link, name))
    return LinkFacts(tuple(needed), frozenset(defined))


# Symbols that only the C++ runtime itself defines, each owning process-wide state
# (exceptions in flight, the classic locale, the unwinder's frame search).
RUNTIME_SYMBOLS = {
    "__cxa_throw": "the C++ exception runtime (libstdc++ / libsupc++)",
    "__gxx_personality_v0": "the C++ exception runtime (libstdc++ / libsupc++)",
    "_ZNSt6locale7classicEv": "libstdc++'s locales and iostreams",
    "_Unwind_RaiseException": "the unwinder (libgcc_eh)",
}


def private_cxx_runtime(facts: LinkFacts) -> list[str]:
    """What of the C++ runtime a library carries a private copy of (it defines the runtime's
    own symbols): such a library, loaded beside torch's shared libstdc++, crashes or
    garbles its errors. Empty: it uses the shared runtime, or none."""
    return sorted({what for symbol, what in RUNTIME_SYMBOLS.items() if symbol in facts.defined})
