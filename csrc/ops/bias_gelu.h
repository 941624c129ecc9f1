// Argument checks of wheelops::bias_gelu and its backward, shared by the CPU
// and CUDA kernels.
#pragma once

#include "wheelops/tensor_checks.h"

namespace wheelops::bias_gelu {

inline void check_args(const Tensor& x, const Tensor& bias, const char* op) {
  check_float_tensor(x, op, "x");
  check_float_tensor(bias, op, "bias");
  check_same_device(x, "x", bias, "bias", op);
  check_same_dtype(x, "x", bias, "bias", op);
  WHEELOPS_CHECK(
      x.dim() >= 1, "wheelops.", op, ": argument 'x' must have at least one dimension");
  WHEELOPS_CHECK(
      bias.dim() == 1 && bias.size(0) == x.size(x.dim() - 1), "wheelops.", op,
      ": argument 'bias' must have shape [", x.size(x.dim() - 1),
      "] (the last dimension of 'x'), got ", shape_string(bias));
}

inline void check_backward_args(
    const Tensor& grad, const Tensor& x, const Tensor& bias) {
  check_args(x, bias, "bias_gelu_backward");
  check_float_tensor(grad, "bias_gelu_backward", "grad");
  check_same_device(grad, "grad", x, "x", "bias_gelu_backward");
  check_same_dtype(grad, "grad", x, "x", "bias_gelu_backward");
  check_same_shape(grad, "grad", x, "x", "bias_gelu_backward");
}

} // namespace wheelops::bias_gelu
