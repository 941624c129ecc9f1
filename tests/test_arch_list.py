"""build_tools.arch_list: what TORCH_CUDA_ARCH_LIST puts into the CUDA library."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from build_tools.arch_list import DEFAULT_ARCH_LISTS, parse_arch_list


def test_default_for_cuda_13():
    archs = parse_arch_list(DEFAULT_ARCH_LISTS[13])
    assert archs.sass == ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0")
    assert archs.ptx == ("12.0",)
    assert archs.spec == "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"


def test_spaces_and_ptx_suffixes():
    archs = parse_arch_list(" 8.0 9.0+PTX;9.0a ")
    assert archs.sass == ("8.0", "9.0", "9.0a") and archs.ptx == ("9.0",)


@pytest.mark.parametrize("spec", ["", "sm_80", "8", "8.0+SASS", "eight.zero"])
def test_rejects_malformed_lists(spec):
    with pytest.raises(ValueError, match="TORCH_CUDA_ARCH_LIST"):
        parse_arch_list(spec)
