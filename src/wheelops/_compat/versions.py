"""Version numbers as the guard compares them, and the variant name of a CUDA release
(PyTorch's labels): what the facts, the policy and the matrix model all read. Import
reads these; the matrix model itself only a rule that prints a command.
"""

from __future__ import annotations


def version_tuple(version: str) -> tuple[int, int]:
    """Major and minor of a version: "13.0" -> (13, 0), "2.14.1+cu130" -> (2, 14)."""
    parts = version.split("+")[0].split(".")
    digits = ["".join(c for c in p if c.isdigit()) or "0" for p in parts[:2]]
    return int(digits[0]), int(digits[1]) if len(digits) > 1 else 0


def variant_name(cuda_version: str | None) -> str:
    """The variant of a CUDA release: None -> "cpu", "13.0" -> "cu130" (PyTorch's labels)."""
    if cuda_version is None:
        return "cpu"
    major, minor = version_tuple(cuda_version)
    return f"cu{major}{minor}"
