// Argument checks and the formula of wheelops::relu_scale, shared by its CPU
// and CUDA kernels.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include "wheelops/tensor_checks.h"

namespace wheelops {

inline void check_relu_scale_args(const Tensor& x) {
  check_float_tensor(x, "relu_scale", "x");
}

// max(x, 0) * alpha; NaN propagates, as torch.relu does.
template <typename A>
C10_HOST_DEVICE inline A relu_scale_value(A x, A alpha) {
  return (x < A(0) ? A(0) : x) * alpha;
}

} // namespace wheelops
