// Argument checks of wheelops::softmax and its backward, and the layout both
// kernels (CPU and CUDA) work on: contiguous rows along the softmax dimension.
#pragma once

#include <torch/csrc/stable/ops.h>

#include "wheelops/tensor_checks.h"
#include "wheelops/tensors.h"

namespace wheelops::softmax {

// `dim` wrapped into [0, max(x.dim(), 1)) as torch does (a 0-dim tensor has one
// dimension of size 1 for this purpose).
inline int64_t wrap_dim(const Tensor& x, int64_t dim, const char* op) {
  const int64_t n = x.dim() > 0 ? x.dim() : 1;
  WHEELOPS_CHECK(
      dim >= -n && dim < n, "wheelops.", op, ": argument 'dim' must be in [", -n, ", ", n - 1,
      "] for 'x' of shape ", shape_string(x), ", got ", dim);
  return dim < 0 ? dim + n : dim;
}

inline int64_t check_forward_args(const Tensor& x, int64_t dim) {
  check_float_tensor(x, "softmax", "x");
  return wrap_dim(x, dim, "softmax");
}

inline int64_t check_backward_args(const Tensor& grad, const Tensor& out, int64_t dim) {
  constexpr const char* op = "softmax_backward";
  check_float_tensor(grad, op, "grad");
  check_float_tensor(out, op, "out");
  check_same_device(grad, "grad", out, "out", op);
  check_same_dtype(grad, "grad", out, "out", op);
  check_same_shape(grad, "grad", out, "out", op);
  return wrap_dim(out, dim, op);
}

inline bool is_last(const Tensor& x, int64_t dim) {
  return x.dim() == 0 || dim == x.dim() - 1;
}

// A contiguous tensor whose last dimension is `dim` of t. Softmax along the
// last dimension is the fast path; other dimensions pay one transposing copy
// in and one out, which keeps a single set of kernels correct for every dim.
inline Tensor move_dim_last(const Tensor& t, int64_t dim) {
  if (is_last(t, dim)) {
    return as_contiguous(t);
  }
  return as_contiguous(torch::stable::transpose(t, dim, t.dim() - 1));
}

// Inverse of move_dim_last for a result computed in that layout; contiguous.
inline Tensor move_dim_back(const Tensor& t, int64_t dim) {
  if (is_last(t, dim)) {
    return t;
  }
  return as_contiguous(torch::stable::transpose(t, dim, t.dim() - 1));
}

} // namespace wheelops::softmax
