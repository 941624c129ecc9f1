// The erf GELU of the CUDA kernels whose result is a 16-bit type: bias_gelu, the
// fused_linear_gelu GELU pass and its sm_90a epilogue, and the GELU family's backward.
//
// gelu(u) = u * Phi(u) and gelu'(u) = Phi(u) + u * phi(u), with Phi the standard normal's
// CDF and phi its density. erff cost 26 instructions an element in the sm_90a epilogue,
// issued while the tensor cores waited (the epilogue was a third of the kernel at K = 768),
// and bound the GELU passes by instruction issue. Here both come from one exponential and
// one reciprocal:
//   m = Phi(-|u|) = e * t * P(t),  e = exp(-u^2 / 2),  t = 1 / (1 + p |u|),
//   Phi(u) = 1 - m for u >= 0, m below;  phi(u) = e / sqrt(2 pi),
// P of degree 5 fitted for the least maximum absolute error of m over |u| in [0, 14]
// (4e-9 in float64; past 14, e is 0). Evaluated in float32 with MUFU.EX2 and MUFU.RCP, Phi is
// within 4.0 float32 ulps (2^-24) of the exact one, gelu within 4.3 ulps of |u| and gelu'
// within 4.1 of 1 + |u| (measured on an H200 over every 16-bit value and 2^24 points of
// [-16, 16]; erff's Phi: 1.1 ulps): 2^-13 of a bf16 rounding, 2^-11 of a half's, and in the
// negative tail, where 1 + erff(u / sqrt 2) cancels, far closer than erff's in relative
// terms. About ten instructions an element fewer than erff: the sm_90a kernel went from
// 5,144 to 3,856 SASS instructions (128 elements a thread), bf16 8192x768->3072 from 90.7 to
// 80.6 us on an H200. float and double keep gelu.h's erf formula, within a few ulps of
// their own rounding. NaN and infinities follow the formula: gelu(inf) = inf,
// gelu(-inf) = -inf * 0 = NaN, gelu'(+-inf) = NaN, NaN gives NaN.
#pragma once

#include "wheelops/kernels/gelu.h"

namespace wheelops::gelu {
namespace normal_tail {

constexpr float kP = 0.276f;
// P's coefficients, lowest first, with 1 / sqrt(2 pi) folded in.
constexpr float kC0 = 0.11762463301420212f;
constexpr float kC1 = 0.04672028124332428f;
constexpr float kC2 = 0.322154700756073f;
constexpr float kC3 = -0.3138631284236908f;
constexpr float kC4 = 0.44081592559814453f;
constexpr float kC5 = -0.11345241963863373f;
constexpr float kHalfLog2E = 0.72134752044448170f;  // exp(-u^2/2) = 2^(-u^2 * this)
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float reciprocal_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

struct Tail {
  float cdf;  // Phi(u)
  float e;    // exp(-u^2 / 2)
};

__device__ __forceinline__ Tail of(float u) {
  const float e = exp2_approx(u * (u * -kHalfLog2E));
  const float t = reciprocal_approx(fmaf(kP, fabsf(u), 1.0f));
  float p = fmaf(kC5, t, kC4);
  p = fmaf(p, t, kC3);
  p = fmaf(p, t, kC2);
  p = fmaf(p, t, kC1);
  p = fmaf(p, t, kC0);
  const float m = e * (p * t);  // Phi(-|u|)
  return {u >= 0.0f ? 1.0f - m : m, e};
}

} // namespace normal_tail

// The erf gelu(u) of a 16-bit result.
__device__ __forceinline__ float forward_16bit(float u) {
  return u * normal_tail::of(u).cdf;
}

// The erf gelu'(u) of a 16-bit gradient.
__device__ __forceinline__ float derivative_16bit(float u) {
  const normal_tail::Tail tail = normal_tail::of(u);
  return fmaf(u * normal_tail::kInvSqrt2Pi, tail.e, tail.cdf);
}

// Whether a kernel whose result (or gradient) is a T takes the formulas above.
template <typename T, Approximate kMode>
constexpr bool kUses16BitErf = sizeof(T) == 2 && kMode == Approximate::kNone;

// gelu(u) as a kernel whose result is a T computes it.
template <typename T, Approximate kMode, typename A>
__device__ __forceinline__ A forward_of(A u) {
  if constexpr (kUses16BitErf<T, kMode>) {
    return forward_16bit(u);
  } else {
    return forward<kMode>(u);
  }
}

// gelu'(u) as a kernel whose gradient is a T computes it.
template <typename T, Approximate kMode, typename A>
__device__ __forceinline__ A derivative_of(A u) {
  if constexpr (kUses16BitErf<T, kMode>) {
    return derivative_16bit(u);
  } else {
    return derivative<kMode>(u);
  }
}

} // namespace wheelops::gelu
