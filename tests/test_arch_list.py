"""GPU arch lists: parsing TORCH_CUDA_ARCH_LIST, the matrix defaults, and what runs where."""

from __future__ import annotations

import pytest
from _checkout import REPO, import_build_tools

from wheelops._compat.archs import describe, kernel_for, parse_arch_list


def test_spaces_and_ptx_suffixes():
    archs = parse_arch_list(" 8.0 9.0+PTX;9.0a ")
    assert archs.sass == ("8.0", "9.0", "9.0a") and archs.ptx == ("9.0",)
    assert archs.spec == "8.0;9.0+PTX;9.0a"


@pytest.mark.parametrize("spec", ["", "sm_80", "8", "8.0+SASS", "eight.zero"])
def test_rejects_malformed_lists(spec):
    with pytest.raises(ValueError, match="TORCH_CUDA_ARCH_LIST"):
        parse_arch_list(spec)


@pytest.mark.parametrize(
    ("spec", "capability", "expected"),
    [
        ("8.0", (8, 0), "SASS 8.0"),
        ("8.0", (8, 6), "SASS 8.0"),  # same major, newer minor: binary compatible
        ("8.0;8.6", (8, 9), "SASS 8.6"),  # the newest fitting SASS
        ("8.0", (9, 0), None),  # SASS never crosses a major
        ("8.6", (8, 0), None),  # nor runs on an older minor
        ("8.0+PTX", (9, 0), "PTX 8.0, JIT-compiled by the driver"),
        ("9.0+PTX", (8, 9), None),  # PTX only for equal or newer GPUs
        ("9.0a", (9, 0), "SASS 9.0a"),
        ("9.0a+PTX", (10, 0), None),  # arch-specific PTX is not forward-compatible
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", (12, 1), "SASS 12.0"),
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", (13, 0), "PTX 12.0, JIT-compiled by the driver"),
        ("7.5;8.0;8.6;9.0;10.0;12.0+PTX", (7, 0), None),
    ],
)
def test_kernel_for_a_capability(spec, capability, expected):
    archs = parse_arch_list(spec)
    assert kernel_for(archs.sass, archs.ptx, capability) == expected


def test_describe():
    assert describe(("8.0",), ()) == "SASS 8.0 and no PTX"
    assert describe(("8.0", "9.0"), ("9.0",)) == "SASS 8.0, 9.0 and PTX 9.0"


@pytest.mark.skipif(not (REPO / "build_tools").is_dir(), reason="needs the source checkout")
def test_build_defaults_come_from_the_matrix(monkeypatch):
    import_build_tools()
    from build_tools.arch_list import arch_list_for

    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    assert arch_list_for("13.0").spec == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    assert arch_list_for("13.2").spec == "7.5;8.0;8.6;9.0;10.0;12.0+PTX"  # newest <= 13.2
    assert arch_list_for("12.9").spec == "7.5;8.0;8.6;9.0;10.0;12.0"
    with pytest.raises(RuntimeError, match=r"no variant for CUDA 11\.8"):
        arch_list_for("11.8")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0+PTX")
    assert arch_list_for("13.0").ptx == ("8.0",)
