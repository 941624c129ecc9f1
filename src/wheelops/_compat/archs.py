"""GPU architectures: parse TORCH_CUDA_ARCH_LIST and decide whether a build runs on a GPU.

Pure Python without torch: the build (build_tools) and the guard share it.
SASS (machine code) for X.Y runs on GPUs of major X and minor >= Y; an
arch-specific "X.Ya" only on X.Y itself. PTX for X.Y is JIT-compiled by the
driver for any GPU of capability >= X.Y.
"""

from __future__ import annotations

from typing import NamedTuple


# A NamedTuple: import loads this module (the policy's coverage rules) and builds none,
# and a frozen dataclass costs import ~0.4 ms to create.
class ArchList(NamedTuple):
    """A parsed TORCH_CUDA_ARCH_LIST: which archs get SASS and which get PTX."""

    spec: str
    sass: tuple[str, ...]
    ptx: tuple[str, ...]


def parse_arch_list(spec: str) -> ArchList:
    """Parse "7.5;8.0;9.0+PTX" (";" or spaces between entries, "+PTX" adds PTX)."""
    sass: list[str] = []
    ptx: list[str] = []
    for entry in spec.replace(" ", ";").split(";"):
        entry = entry.strip()
        if not entry:
            continue
        arch, _, suffix = entry.partition("+")
        if suffix and suffix.upper() != "PTX":
            raise ValueError(
                f"TORCH_CUDA_ARCH_LIST entry {entry!r}: only '+PTX' may follow an arch"
            )
        major, dot, minor = arch.partition(".")
        if not (dot and major.isdigit() and minor.rstrip("af").isdigit()):
            raise ValueError(
                f"TORCH_CUDA_ARCH_LIST entry {entry!r} is not of the form MAJOR.MINOR[+PTX]"
            )
        sass.append(arch)
        if suffix:
            ptx.append(arch)
    if not sass:
        raise ValueError(f"TORCH_CUDA_ARCH_LIST {spec!r} names no architecture")
    return ArchList(
        spec=";".join(a + ("+PTX" if a in ptx else "") for a in sass),
        sass=tuple(sass),
        ptx=tuple(ptx),
    )


def _split(arch: str) -> tuple[int, int, str]:
    major, _, minor = arch.partition(".")
    digits = minor.rstrip("af")
    return int(major), int(digits), minor[len(digits) :]


def sass_runs_on(arch: str, capability: tuple[int, int]) -> bool:
    major, minor, suffix = _split(arch)
    if suffix == "a":  # arch-specific features: that exact GPU only
        return (major, minor) == capability
    return major == capability[0] and minor <= capability[1]


def ptx_runs_on(arch: str, capability: tuple[int, int]) -> bool:
    major, minor, suffix = _split(arch)
    if suffix:  # "a"/"f" PTX is not forward-compatible
        return (major, minor) == capability if suffix == "a" else major == capability[0]
    return (major, minor) <= capability


def served_by_older_sass(sass: tuple[str, ...]) -> dict[str, str]:
    """Each SASS arch of `sass` that an older SASS of the same major in `sass` already
    runs on every GPU of, mapped to that older arch: {"8.6": "8.0"}. Such an arch only
    grows a library (8.6 GPUs run 8.0's SASS); an arch-specific "X.Ya" is never served
    (nor serves): it has features the others lack."""
    plain = [a for a in sass if not _split(a)[2]]
    served = {}
    for arch in plain:
        major, minor, _ = _split(arch)
        older = [a for a in plain if _split(a)[0] == major and _split(a)[1] < minor]
        if older:
            served[arch] = min(older, key=_split)
    return served


def kernel_for(
    sass: tuple[str, ...], ptx: tuple[str, ...], capability: tuple[int, int]
) -> str | None:
    """What a build runs on a GPU of `capability`: "SASS 8.6", "PTX 8.0 (JIT)", or None.

    The newest fitting SASS wins, as the CUDA driver picks it over PTX.
    """
    fitting = [a for a in sass if sass_runs_on(a, capability)]
    if fitting:
        return f"SASS {max(fitting, key=_split)}"
    fitting = [a for a in ptx if ptx_runs_on(a, capability)]
    if fitting:
        return f"PTX {max(fitting, key=_split)}, JIT-compiled by the driver"
    return None


def describe(sass: tuple[str, ...], ptx: tuple[str, ...]) -> str:
    """Say what a build holds, e.g. "SASS 8.0, 9.0 and PTX 9.0" or "SASS 8.0 and no PTX"."""
    have = "SASS " + ", ".join(sass) if sass else "no SASS"
    return have + (" and PTX " + ", ".join(ptx) if ptx else " and no PTX")
