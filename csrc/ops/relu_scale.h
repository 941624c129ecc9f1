// Argument checks and the formula of wheelops::relu_scale, shared by its CPU
// and CUDA kernels.
//
// The backward reads a bit mask, not x: relu_scale_with_mask (the forward when a
// gradient is wanted) writes bit j of byte k for element 8k + j of x, in
// contiguous order, 1 where the gradient passes. The backward then moves
// 2 elements and 1/8 byte per element instead of 3 elements (torch.compile's
// saves a 1-byte mask: float32 at 9 bytes an element against our 12 was 0.75x).
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include <cstdint>

#include "wheelops/narrowing.h"
#include "wheelops/tensor_checks.h"

namespace wheelops::relu_scale {

inline void check_args(const Tensor& x, const char* op) {
  check_float_tensor(x, op, "x");
}

// Bytes of the mask of `numel` elements: one bit each.
C10_HOST_DEVICE inline int64_t relu_scale_mask_bytes(int64_t numel) {
  return (numel + 7) / 8;
}

inline void check_backward_args(const Tensor& grad, const Tensor& mask) {
  constexpr const char* op = "relu_scale_backward";
  check_float_tensor(grad, op, "grad");
  // Before the mask (wheelops 0.1.0's first builds) this argument was x: a graph that
  // torch.compile cached then still passes x, since its caches take a custom op by name.
  WHEELOPS_CHECK(
      mask.scalar_type() == ScalarType::Byte, "wheelops.", op, ": argument 'mask' has dtype ",
      torch::headeronly::toString(mask.scalar_type()),
      "; expected uint8 (the mask wheelops.relu_scale_with_mask returns). From a "
      "torch.compile'd model: its cache holds a graph of an older wheelops, whose backward "
      "took x here; clear the cache (the directory $TORCHINDUCTOR_CACHE_DIR, by default "
      "/tmp/torchinductor_$USER) and compile again");
  check_same_device(grad, "grad", mask, "mask", op);
  const int64_t bytes = relu_scale_mask_bytes(grad.numel());
  WHEELOPS_CHECK(
      mask.dim() == 1 && mask.size(0) == bytes, "wheelops.", op,
      ": argument 'mask' must have shape [", bytes, "] (one bit per element of 'grad', ",
      grad.numel(), " elements), got ", shape_string(mask));
}

// max(x, 0) * alpha; NaN propagates, as torch.relu does.
template <typename A>
C10_HOST_DEVICE inline A relu_scale_value(A x, A alpha) {
  return (x < A(0) ? A(0) : x) * alpha;
}

// Whether d/dx relu(x) * alpha passes the gradient: not where x <= 0, so NaN
// passes it, as torch's threshold_backward(grad, relu(x), 0) does.
template <typename A>
C10_HOST_DEVICE inline bool relu_scale_passes(A x) {
  return !(x <= A(0));
}

// The gradient: alpha * grad where it passes, else 0. Linear in grad, so it is
// also the forward-mode derivative (tangent for grad).
template <typename A>
C10_HOST_DEVICE inline A relu_scale_grad_value(A grad, bool passes, A alpha) {
  return passes ? grad * alpha : A(0);
}

} // namespace wheelops::relu_scale
