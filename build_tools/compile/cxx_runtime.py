"""Refuse a native library that carries its own copy of the C++ runtime.

A torch extension must share the process's one libstdc++ (and unwinder) with
torch. A compiler that links libstdc++ statically into shared libraries gives
the library a private, half-interposed copy of the runtime: iostreams state
and locales from one copy, functions from the other. There an argument check
formats its message with garbage ("got [ and ["), or crashes with SIGSEGV
(with -Bsymbolic-functions, as Ubuntu's Python links extensions), instead of
raising. The GPU machine's /opt/gcc/bin/g++ is such a compiler without saying
so: its wrapper puts a library directory holding only libstdc++.a first
(-B/opt/gcc/lib/gcc/x86_64-linux-gnu/13/). flags.cxx_runtime_link_flags() names
the shared runtime; this check proves the linker took it, for every compiler.
"""

from __future__ import annotations

from pathlib import Path

from build_tools.compat import links

SHARED_CXX_RUNTIME = "libstdc++.so.6"


class CxxRuntimeError(RuntimeError):
    """A built library does not use the process's shared C++ runtime."""


def check_shared_cxx_runtime(library: Path, compiler: str) -> str:
    """Raise CxxRuntimeError if `library` defines any of the C++ runtime's own symbols;
    else return what it links, for the build facts ("libstdc++.so.6 (shared)")."""
    facts = links.link_facts(library)
    embedded = links.private_cxx_runtime(facts)
    if embedded:
        raise CxxRuntimeError(
            f"{library.name} was linked with a private copy of {' and '.join(embedded)} "
            f"instead of the shared {SHARED_CXX_RUNTIME} that torch uses (compiler: "
            f"{compiler}). Such a library crashes or garbles its error messages when an "
            "argument check throws. The compiler links the C++ runtime statically into "
            "shared libraries (-static-libstdc++ or -static-libgcc in its wrapper or specs, "
            "or no libstdc++.so.6 / libgcc_s.so.1 where its linker looks); build with one "
            "that links it dynamically, e.g. CXX=/usr/bin/g++ CC=/usr/bin/gcc."
        )
    if SHARED_CXX_RUNTIME in facts.needed:
        return f"{SHARED_CXX_RUNTIME} (shared)"
    return "none"  # a library with no C++ runtime calls at all


def check_libraries(libraries: list[Path], compiler: str) -> str:
    """check_shared_cxx_runtime for every built library; what they link, for the facts."""
    return ", ".join(sorted({check_shared_cxx_runtime(lib, compiler) for lib in libraries}))
