// fused_linear_gelu's forward on CUDA: which path computes it, decided from plain facts.
//
// No CUDA or torch headers, so that the rule compiles with the host compiler alone and is
// checked, whole, on a machine with no GPU (tests/test_fused_linear_gelu_path.py): that is
// how sm_80 (A100), sm_89 and sm_100, which must never take the sm_90a kernel, are tested
// here. fused_linear_gelu.cu computes the facts and runs the path named.
#pragma once

#include <cstdint>

namespace wheelops::fused_linear_gelu {

enum class Precision { kSixteenBit, kFloat32, kFloat64 };  // float16/bfloat16, float, double

struct ForwardFacts {
  Precision precision;
  bool tanh;                 // approximate="tanh"; else "none", the exact (erf) GELU
  bool bias;                 // a bias is given
  bool keep_pre_activation;  // a gradient may be asked: the forward also writes the GEMM + bias
  bool sm90a_kernels;        // the library links the sm_90a kernels (WHEELOPS_SM90A_KERNELS)
  int compute_capability;    // the device's, major * 10 + minor (90: Hopper)
  int64_t n;                 // out_features
  int64_t k;                 // in_features
  bool aligned_16;           // every operand given (x, w, bias, out, pre) is 16-byte aligned
};

// in_features up to which the sm_90a kernel runs its ping-pong schedule
// (fused_linear_gelu_sm90a.cu), the one built to write the pre-activation too.
constexpr int64_t kSm90aPingpongMaxK = 1024;

enum class ForwardPath {
  // One CUTLASS GEMM whose epilogue adds the bias and applies the exact GELU in float32
  // before rounding, writing the pre-activation (rounded once) too where it is kept
  // (sm90a::run, fused_linear_gelu_sm90a.cu). It may decline the problem (its tiles'
  // alignment, int32 sizes, too few tiles to fill the GPU).
  kCutlassErfGelu,
  // One cuBLASLt GEMM whose epilogue adds the bias and applies cuBLASLt's GELU (the tanh
  // form) in float32 before rounding: GELU_BIAS / GELU, or GELU_AUX_BIAS / GELU_AUX writing
  // the pre-activation for the backward too. cuBLASLt may find no algorithm (declines).
  kGeluEpilogue,
  // cuBLASLt's BIAS epilogue writes the pre-activation rounded to the dtype (exactly what
  // F.linear returns), then one vectorized GELU pass (in place when the pre-activation is
  // not kept): as exact as F.gelu(F.linear(...)), about as fast. cuBLASLt has no erf GELU
  // epilogue. cuBLASLt may find no algorithm (declines).
  kBiasEpilogueThenGelu,
  // A plain GEMM, then our bias kernel (where there is a bias) and the GELU pass.
  kGemmThenGelu,
  // K = 0, nothing to multiply: the pre-activation is zeroed (memset), then our bias kernel
  // and the GELU pass.
  kZeroK,
};

// Where cuBLASLt's bias and GELU epilogues are used. On an H100 (cuBLASLt 13.1) the BIAS
// and GELU_BIAS epilogues gave wrong elements (about one a row, off by up to 30 bf16 ulps)
// when out_features was not a multiple of 8 or an operand was not 16-byte aligned: there
// the GEMM runs plain and our kernels add the bias. Not for float64 (no epilogues), nor
// for K = 0 (no GEMM).
constexpr bool epilogue_fits(const ForwardFacts& f) {
  return f.precision != Precision::kFloat64 && f.k > 0 && f.n % 8 == 0 && f.k % 8 == 0 &&
         f.aligned_16;
}

// The path tried first. Every GPU but exactly sm_90 takes the cuBLASLt paths: the CUTLASS
// kernel is sm_90a code (wgmma, TMA), which neither an sm_80/sm_89 GPU nor an sm_100 one
// (no wgmma) runs.
constexpr ForwardPath choose_forward_path(const ForwardFacts& f) {
  if (f.k == 0) {
    return ForwardPath::kZeroK;  // sm90a::run declines K = 0 too
  }
  // The erf GELU in the GEMM's epilogue; where the pre-activation is kept, only up to
  // kSm90aPingpongMaxK (above, cuBLASLt's BIAS GEMM and the GELU pass are as fast: measured,
  // H200; the .cu of the sm_90a kernel has the numbers).
  if (f.sm90a_kernels && f.compute_capability == 90 && f.precision == Precision::kSixteenBit &&
      !f.tanh && f.bias && (!f.keep_pre_activation || f.k <= kSm90aPingpongMaxK)) {
    return ForwardPath::kCutlassErfGelu;
  }
  // cuBLASLt's GELU is the tanh form, evaluated with an error of up to 38.5 float32 ulps of
  // 1 + |u| (measured, H100): far below a 16-bit result's rounding, far above F.gelu's in
  // float32, so float32 takes the exact path below (as fast: its GEMM dominates, and the
  // GELU_BIAS kernels were slower than BIAS ones there).
  if (f.tanh && f.precision == Precision::kSixteenBit && epilogue_fits(f)) {
    return ForwardPath::kGeluEpilogue;
  }
  return f.bias && epilogue_fits(f) ? ForwardPath::kBiasEpilogueThenGelu
                                    : ForwardPath::kGemmThenGelu;
}

// The path taken where `declined` did not run: the rule again without it.
constexpr ForwardPath next_forward_path(ForwardPath declined, const ForwardFacts& f) {
  switch (declined) {
    case ForwardPath::kCutlassErfGelu: {
      ForwardFacts without = f;
      without.sm90a_kernels = false;
      return choose_forward_path(without);
    }
    case ForwardPath::kGeluEpilogue:  // the operands fit the epilogues: the BIAS one serves
      return f.bias ? ForwardPath::kBiasEpilogueThenGelu : ForwardPath::kGemmThenGelu;
    case ForwardPath::kBiasEpilogueThenGelu:
      return ForwardPath::kGemmThenGelu;
    case ForwardPath::kGemmThenGelu:
    case ForwardPath::kZeroK:
      break;
  }
  return declined;  // these never decline
}

} // namespace wheelops::fused_linear_gelu
