// Scalar arguments (alpha, eps, max_value) arrive as double and are used in the
// kernels' accumulate type. C++ leaves converting a double beyond float's range
// undefined; IEEE round-to-nearest, which eager PyTorch follows, gives the
// largest float within half an ulp of it and an infinity beyond.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

namespace wheelops {

// 2**128 - 2**103: the smallest double that rounds to float infinity.
constexpr double kFloatRoundsToInf =
    static_cast<double>(std::numeric_limits<float>::max()) + 0x1p103;

template <typename A>
inline A round_to(double v) {
  if constexpr (std::is_same_v<A, double>) {
    return v;
  } else {
    static_assert(std::is_same_v<A, float>, "accumulate types are float or double");
    const double magnitude = std::fabs(v);
    if (std::isnan(v) || magnitude <= std::numeric_limits<float>::max()) {
      return static_cast<float>(v);
    }
    const float saturated = magnitude < kFloatRoundsToInf ? std::numeric_limits<float>::max()
                                                          : std::numeric_limits<float>::infinity();
    return v < 0 ? -saturated : saturated;
  }
}

} // namespace wheelops
