// Argument checks and the formula of wheelops::relu_scale, shared by its CPU
// and CUDA kernels.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include "wheelops/narrowing.h"
#include "wheelops/tensor_checks.h"

namespace wheelops {

inline void check_relu_scale_args(const Tensor& x) {
  check_float_tensor(x, "relu_scale", "x");
}

inline void check_relu_scale_backward_args(const Tensor& grad, const Tensor& x) {
  check_float_tensor(grad, "relu_scale_backward", "grad");
  check_float_tensor(x, "relu_scale_backward", "x");
  check_same_device(grad, "grad", x, "x", "relu_scale_backward");
  check_same_dtype(grad, "grad", x, "x", "relu_scale_backward");
  check_same_shape(grad, "grad", x, "x", "relu_scale_backward");
}

// max(x, 0) * alpha; NaN propagates, as torch.relu does.
template <typename A>
C10_HOST_DEVICE inline A relu_scale_value(A x, A alpha) {
  return (x < A(0) ? A(0) : x) * alpha;
}

// d/dx relu(x) * alpha: 0 where x <= 0, else alpha, so NaN passes the gradient
// as torch's threshold_backward(grad, relu(x), 0) does. Linear in grad, so it is
// also the forward-mode derivative (tangent for grad).
template <typename A>
C10_HOST_DEVICE inline A relu_scale_grad_value(A grad, A x, A alpha) {
  return x <= A(0) ? A(0) : grad * alpha;
}

} // namespace wheelops
