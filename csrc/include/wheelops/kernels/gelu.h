// GELU and its derivative, shared by bias_gelu and fused_linear_gelu, CPU and CUDA,
// so all compute the same formula (PyTorch's, for approximate = "none" and "tanh"); the
// CUDA kernels of 16-bit results take gelu_16bit.cuh's erf form, a few float32 ulps from it.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include "wheelops/math.h"

namespace wheelops::gelu {

enum class Approximate { kNone, kTanh };

using math::erf_;
using math::exp_;
using math::tanh_;

template <typename A>
struct Constants {
  static constexpr A kSqrt1_2 = A(0.70710678118654752440);   // 1/sqrt(2)
  static constexpr A kSqrt2OverPi = A(0.79788456080286535588); // sqrt(2/pi)
  static constexpr A kInvSqrt2Pi = A(0.39894228040143267794);  // 1/sqrt(2*pi)
  static constexpr A kCubic = A(0.044715);
};

template <Approximate kMode, typename A>
C10_HOST_DEVICE inline A forward(A u) {
  using C = Constants<A>;
  if constexpr (kMode == Approximate::kTanh) {
    const A inner = C::kSqrt2OverPi * (u + C::kCubic * u * u * u);
    return A(0.5) * u * (A(1) + tanh_(inner));
  } else {
    return A(0.5) * u * (A(1) + erf_(u * C::kSqrt1_2));
  }
}

// d gelu(u) / du
template <Approximate kMode, typename A>
C10_HOST_DEVICE inline A derivative(A u) {
  using C = Constants<A>;
  if constexpr (kMode == Approximate::kTanh) {
    const A u2 = u * u;
    const A inner = C::kSqrt2OverPi * (u + C::kCubic * u2 * u);
    const A t = tanh_(inner);
    const A d_inner = C::kSqrt2OverPi * (A(1) + A(3) * C::kCubic * u2);
    return A(0.5) * (A(1) + t) + A(0.5) * u * (A(1) - t * t) * d_inner;
  } else {
    const A cdf = A(0.5) * (A(1) + erf_(u * C::kSqrt1_2));
    const A pdf = C::kInvSqrt2Pi * exp_(A(-0.5) * u * u);
    return cdf + u * pdf;
  }
}

} // namespace wheelops::gelu

#include "wheelops/error.h"

#include <string>
#include <type_traits>

namespace wheelops::gelu {

inline Approximate parse_approximate(const std::string& value, const char* op) {
  if (value == "none") {
    return Approximate::kNone;
  }
  WHEELOPS_CHECK(
      value == "tanh", "wheelops.", op,
      ": argument 'approximate' must be 'none' or 'tanh' (got '", value, "')");
  return Approximate::kTanh;
}

// Calls fn(std::integral_constant<Approximate, mode>{}) so kernels are
// specialised per mode instead of branching per element.
template <typename Fn>
void dispatch_mode(Approximate mode, Fn&& fn) {
  if (mode == Approximate::kTanh) {
    fn(std::integral_constant<Approximate, Approximate::kTanh>{});
  } else {
    fn(std::integral_constant<Approximate, Approximate::kNone>{});
  }
}

} // namespace wheelops::gelu
