// Argument checks of wheelops::add, shared by its CPU and CUDA kernels.
#pragma once

#include "wheelops/tensor_checks.h"

namespace wheelops::add {

inline void check_args(const Tensor& a, const Tensor& b) {
  check_float_tensor(a, "add", "a");
  check_float_tensor(b, "add", "b");
  check_same_device(a, "a", b, "b", "add");
  check_same_dtype(a, "a", b, "b", "add");
  check_same_shape(a, "a", b, "b", "add");
}

} // namespace wheelops::add
