// Argument checks and the formula of wheelops::normalize_volume, shared by its
// CPU and CUDA kernels.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include <cstdint>
#include <limits>

#include "wheelops/tensor_checks.h"

namespace wheelops {

// The divisor: max_value rounded to float32, which must be positive and finite.
inline float check_normalize_volume_args(const Tensor& vol, double max_value) {
  WHEELOPS_CHECK(
      vol.scalar_type() == ScalarType::UInt16,
      "wheelops.normalize_volume: argument 'vol' has dtype ",
      torch::headeronly::toString(vol.scalar_type()), "; expected uint16 (torch.uint16)");
  // Range first: converting an out-of-range double to float is undefined.
  const bool in_range = max_value > 0.0 && max_value <= std::numeric_limits<float>::max();
  const float divisor = in_range ? static_cast<float>(max_value) : 0.0f;
  WHEELOPS_CHECK(
      divisor > 0.0f,
      "wheelops.normalize_volume: argument 'max_value' must be positive and finite in "
      "float32, got ",
      max_value);
  return divisor;
}

// vol / max_value as one float32 division: every uint16 is exact in float32,
// so this is the correctly rounded quotient (no reciprocal multiply).
C10_HOST_DEVICE inline float normalize_value(uint16_t v, float divisor) {
  return static_cast<float>(v) / divisor;
}

} // namespace wheelops
