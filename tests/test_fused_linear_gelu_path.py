"""fused_linear_gelu's CUDA forward path rule (csrc/ops/fused_linear_gelu_path.h), on the CPU.

The rule is a header with no CUDA or torch includes: one small program including only it
is compiled with the build's host compiler and prints, for every combination of the facts
below, the paths the forward tries in order (each next one where the one before declines
the problem at run time). The table expected here is written from the op's documented
behaviour (docs/ops.md), not derived from the C++. This is where sm_80 (A100), sm_89 and
sm_100 are tested: no such GPU runs the suite, and none of them may take the sm_90a kernel.
"""

from __future__ import annotations

import itertools
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from _checkout import REPO

from build_tools.compile import builder

HEADER = REPO / "csrc" / "ops" / "fused_linear_gelu_path.h"

PRECISIONS = ("16bit", "float32", "float64")  # the header's Precision, in order
CAPABILITIES = (75, 80, 86, 89, 90, 100, 120)
# (out_features, in_features, every operand 16-byte aligned)
SHAPES = (
    (3072, 768, True),
    (3072, 4096, True),  # above kSm90aPingpongMaxK: a kept pre-activation leaves CUTLASS
    (8, 8, True),
    (3070, 768, True),  # out_features not a multiple of 8
    (3072, 766, True),  # in_features not a multiple of 8
    (3072, 768, False),  # an operand not 16-byte aligned
    (3072, 0, True),  # K = 0
    (5, 0, False),
)
NAMES = ("cutlass", "gelu_epilogue", "bias_epilogue", "gemm", "zero_k")  # ForwardPath, in order

PROGRAM = r"""
#include "fused_linear_gelu_path.h"

#include <cstdio>

using namespace wheelops::fused_linear_gelu;

// The rule is usable where the .cu needs it, at compile time too.
static_assert(choose_forward_path({Precision::kSixteenBit, false, true, false, true, 80, 3072,
                                   768, true}) != ForwardPath::kCutlassErfGelu);

int main() {
  int precision, tanh, bias, keep, sm90a, capability, aligned;
  long long n, k;
  while (std::scanf("%d %d %d %d %d %d %lld %lld %d", &precision, &tanh, &bias, &keep, &sm90a,
                    &capability, &n, &k, &aligned) == 9) {
    const ForwardFacts facts{static_cast<Precision>(precision), tanh != 0, bias != 0, keep != 0,
                             sm90a != 0, capability, static_cast<int64_t>(n),
                             static_cast<int64_t>(k), aligned != 0};
    ForwardPath path = choose_forward_path(facts);
    for (int step = 0; step < 8; ++step) {  // a chain longer than the paths is a loop
      std::printf("%d ", static_cast<int>(path));
      const ForwardPath next = next_forward_path(path, facts);
      if (next == path) {
        break;
      }
      path = next;
    }
    std::printf("\n");
  }
  return 0;
}
"""


@dataclass(frozen=True)
class Facts:
    precision: str
    tanh: bool
    bias: bool
    keep_pre_activation: bool
    sm90a_kernels: bool
    capability: int
    n: int
    k: int
    aligned: bool

    def line(self) -> str:
        flags = (self.tanh, self.bias, self.keep_pre_activation, self.sm90a_kernels)
        return " ".join(
            map(
                str,
                (
                    PRECISIONS.index(self.precision),
                    *map(int, flags),
                    self.capability,
                    self.n,
                    self.k,
                    int(self.aligned),
                ),
            )
        )


ALL_FACTS = [
    Facts(p, t, b, keep, sm90a, cc, n, k, aligned)
    for p, t, b, keep, sm90a, cc, (n, k, aligned) in itertools.product(
        PRECISIONS,
        (False, True),
        (False, True),
        (False, True),
        (False, True),
        CAPABILITIES,
        SHAPES,
    )
]


def expected_paths(f: Facts) -> list[str]:
    """The paths tried in order, as docs/ops.md's fused_linear_gelu table states them."""
    if f.k == 0:
        return ["zero_k"]  # nothing to multiply: zeros, the bias, the GELU
    # cuBLASLt's bias/GELU epilogues: not for float64, nor where out_features or
    # in_features is not a multiple of 8 or an operand is not 16-byte aligned (wrong
    # elements on an H100 there).
    epilogues = f.precision != "float64" and f.n % 8 == 0 and f.k % 8 == 0 and f.aligned
    pre_activation = ["bias_epilogue", "gemm"] if f.bias and epilogues else ["gemm"]
    # The CUTLASS kernel is sm_90a code: exactly compute capability 9.0, a library that
    # links it, 16-bit erf with a bias; where the pre-activation is kept, in_features up to
    # 1024 (its ping-pong kernel, the one that writes it too).
    cutlass = (
        f.capability == 90
        and f.sm90a_kernels
        and f.precision == "16bit"
        and not f.tanh
        and f.bias
        and (not f.keep_pre_activation or f.k <= 1024)
    )
    if cutlass:
        return ["cutlass", *pre_activation]
    if f.tanh and f.precision == "16bit" and epilogues:
        return ["gelu_epilogue", *pre_activation]
    return pre_activation


@pytest.fixture(scope="module")
def actual_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[Facts, list[str]]:
    try:
        cxx = builder.host_compiler()
    except SystemExit as no_compiler:  # the build's own words: no CXX, no c++ on PATH
        pytest.skip(f"needs a C++ compiler: {no_compiler}")
    work = tmp_path_factory.mktemp("path_rule")
    (work / "rule.cpp").write_text(PROGRAM)
    binary = work / "rule"
    compile_cmd = [cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{HEADER.parent}"]
    subprocess.run([*compile_cmd, "rule.cpp", "-o", str(binary)], cwd=work, check=True)
    stdin = "".join(f.line() + "\n" for f in ALL_FACTS)
    out = subprocess.run([str(binary)], input=stdin, capture_output=True, text=True, check=True)
    rows = out.stdout.splitlines()
    return {f: [NAMES[int(i)] for i in row.split()] for f, row in zip(ALL_FACTS, rows, strict=True)}


def test_the_header_includes_neither_cuda_nor_torch() -> None:
    includes = [
        line for line in Path(HEADER).read_text().splitlines() if line.startswith("#include")
    ]
    assert includes == ["#include <cstdint>"]


def test_whole_table(actual_paths: dict[Facts, list[str]]) -> None:
    wrong = {
        f: (got, want) for f, got in actual_paths.items() if got != (want := expected_paths(f))
    }
    assert not wrong, f"{len(wrong)} rows differ (got, expected), e.g. {list(wrong.items())[:5]}"


def test_only_sm_90_takes_the_cutlass_kernel(actual_paths: dict[Facts, list[str]]) -> None:
    takers = {f.capability for f, paths in actual_paths.items() if "cutlass" in paths}
    assert takers == {90}
    # On sm_90 exactly: 16-bit erf with a bias, a library built with the kernel; training
    # (the pre-activation kept) only up to in_features 1024.
    on_90 = {
        (f.precision, f.tanh, f.bias, f.keep_pre_activation, f.sm90a_kernels)
        for f, paths in actual_paths.items()
        if f.capability == 90 and paths[0] == "cutlass"
    }
    assert on_90 == {("16bit", False, True, False, True), ("16bit", False, True, True, True)}
    kept_ks = {
        f.k for f, paths in actual_paths.items() if f.keep_pre_activation and paths[0] == "cutlass"
    }
    assert kept_ks and max(kept_ks) <= 1024
    inference_ks = {
        f.k
        for f, paths in actual_paths.items()
        if not f.keep_pre_activation and paths[0] == "cutlass"
    }
    assert 4096 in inference_ks


@pytest.mark.parametrize("capability", [80, 89, 100])
def test_other_gpus_take_the_cublaslt_paths(
    actual_paths: dict[Facts, list[str]], capability: int
) -> None:
    """An A100 (and sm_89, sm_100) with the very facts that send sm_90 to CUTLASS."""
    facts = Facts("16bit", False, True, False, True, capability, 3072, 768, True)
    assert actual_paths[facts] == ["bias_epilogue", "gemm"]
    assert actual_paths[Facts("16bit", True, True, True, True, capability, 3072, 768, True)] == [
        "gelu_epilogue",
        "bias_epilogue",
        "gemm",
    ]


def test_cutlass_declining_falls_through(actual_paths: dict[Facts, list[str]]) -> None:
    """sm90a::run declines shapes its tiles do not fit: the cuBLASLt paths follow."""
    fitting = Facts("16bit", False, True, False, True, 90, 3072, 768, True)
    assert actual_paths[fitting] == ["cutlass", "bias_epilogue", "gemm"]
    odd = Facts("16bit", False, True, False, True, 90, 3070, 768, True)
    assert actual_paths[odd] == ["cutlass", "gemm"]


def test_epilogues_only_where_they_fit(actual_paths: dict[Facts, list[str]]) -> None:
    for f, paths in actual_paths.items():
        fits = f.precision != "float64" and f.k > 0 and f.n % 8 == 0 and f.k % 8 == 0 and f.aligned
        if not fits:
            assert "gelu_epilogue" not in paths and "bias_epilogue" not in paths, f
        if f.precision != "16bit":  # float32/float64: the exact GELU pass, never cuBLASLt's
            assert "gelu_epilogue" not in paths, f
            assert paths[-1] in ("gemm", "zero_k") and "cutlass" not in paths, f
        if f.tanh and f.precision == "16bit" and fits:
            assert paths[0] == "gelu_epilogue", f
        if f.k == 0:
            assert paths == ["zero_k"], f
