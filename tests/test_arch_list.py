"""GPU arch lists: parsing TORCH_CUDA_ARCH_LIST, the matrix defaults, and what runs where."""

from __future__ import annotations

import itertools

import pytest
from _checkout import REPO

from wheelops._compat.archs import describe, kernel_for, parse_arch_list, served_by_older_sass


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
    from build_tools.plan.arch_list import arch_list_for

    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    assert arch_list_for("13.0").spec == "7.5;8.0;9.0;10.0;12.0+PTX"
    assert arch_list_for("13.2").spec == "7.5;8.0;9.0;10.0;12.0+PTX"  # newest <= 13.2
    assert arch_list_for("12.9").spec == "7.5;8.0;9.0;10.0;12.0"
    with pytest.raises(RuntimeError, match=r"no variant for CUDA 11\.8"):
        arch_list_for("11.8")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0+PTX")
    assert arch_list_for("13.0").ptx == ("8.0",)


@pytest.mark.parametrize(
    ("sass", "served"),
    [
        (("7.0", "7.5", "8.0", "8.6", "9.0"), {"7.5": "7.0", "8.6": "8.0"}),
        (("8.6", "8.0", "8.9"), {"8.6": "8.0", "8.9": "8.0"}),  # by the oldest, in any order
        (("10.0", "12.0", "12.1"), {"12.1": "12.0"}),  # 12.0 is not served by 10.0
        (("9.0", "9.0a", "10.0", "10.3a"), {}),  # arch-specific code serves and is served by none
        (("8.6",), {}),
    ],
)
def test_served_by_older_sass(sass, served):
    assert served_by_older_sass(sass) == served


# Every capability a list below can name, and a few beyond them.
CAPABILITIES = [(m, n) for m in range(6, 14) for n in range(10)]
POOL = ("7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "9.0a", "10.0", "10.3", "12.0", "12.1")


def test_dropping_served_sass_keeps_every_gpus_machine_code():
    """The size rule (DESIGN.md 9) takes no native code from any GPU: over every subset of
    POOL, with the served archs dropped each capability still runs SASS (the same SASS
    major) where it did, and the guard accepts exactly the GPUs it accepted."""
    for size in range(1, len(POOL) + 1):
        for sass in itertools.combinations(POOL, size):
            kept = tuple(a for a in sass if a not in served_by_older_sass(sass))
            for capability in CAPABILITIES:
                before = kernel_for(sass, (), capability)
                after = kernel_for(kept, (), capability)
                assert (before is None) == (after is None), (sass, capability)
                if before is not None:
                    assert after is not None and after.split(".")[0] == before.split(".")[0]


@pytest.mark.skipif(not (REPO / "build_tools").is_dir(), reason="needs the source checkout")
def test_matrix_ships_no_served_sass():
    """No variant builds SASS that an older SASS of its own list already runs everywhere."""
    from build_tools.plan import matrix as build_matrix

    for variant in build_matrix.load().variants:
        if variant.arch_list:
            sass = parse_arch_list(variant.arch_list).sass
            assert served_by_older_sass(sass) == {}, (variant.name, variant.arch_list)
