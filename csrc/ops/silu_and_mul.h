// Argument checks and the formulas of wheelops::silu_and_mul (SwiGLU), shared
// by its CPU and CUDA kernels so both compute the same thing.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include <vector>

#include "wheelops/math.h"
#include "wheelops/tensor_checks.h"

namespace wheelops::silu_and_mul {

inline void check_forward_args(const Tensor& x, const char* op = "silu_and_mul") {
  check_float_tensor(x, op, "x");
  WHEELOPS_CHECK(
      x.dim() >= 1 && x.size(x.dim() - 1) % 2 == 0, "wheelops.", op,
      ": argument 'x' must have an even last dimension (2 * d: gate, then up), got shape ",
      shape_string(x));
}

inline void check_backward_args(const Tensor& grad, const Tensor& x) {
  constexpr const char* op = "silu_and_mul_backward";
  check_forward_args(x, op);
  check_float_tensor(grad, op, "grad");
  check_same_device(grad, "grad", x, "x", op);
  check_same_dtype(grad, "grad", x, "x", op);
  bool ok = grad.dim() == x.dim() && grad.size(grad.dim() - 1) * 2 == x.size(x.dim() - 1);
  for (int64_t d = 0; ok && d + 1 < x.dim(); ++d) {
    ok = grad.size(d) == x.size(d);
  }
  WHEELOPS_CHECK(
      ok, "wheelops.", op, ": argument 'grad' must have the shape of the output, 'x' with its "
      "last dimension halved (x has shape ", shape_string(x), ", grad has ", shape_string(grad),
      ")");
}

// x viewed as [rows, 2 * d]; the output as [rows, d].
struct Rows {
  int64_t rows;
  int64_t d;
};

// The output's shape: x's with the last dimension halved.
inline std::vector<int64_t> output_shape(const Tensor& x) {
  std::vector<int64_t> shape(x.dim());
  for (int64_t i = 0; i < x.dim(); ++i) {
    shape[i] = x.size(i);
  }
  shape.back() /= 2;
  return shape;
}

inline Rows rows_of(const Tensor& x) {
  const RowsCols shape = rows_cols(x);
  return {shape.rows, shape.cols / 2};
}

using math::exp_;

// silu(a) * b, with silu(a) = a / (1 + exp(-a)) as PyTorch computes it (so
// silu(-inf) is NaN and silu(inf) is inf, as in torch).
template <typename A>
C10_HOST_DEVICE inline A forward(A a, A b) {
  return a / (A(1) + exp_(-a)) * b;
}

// d/da and d/db of silu(a) * b, times g: s = sigmoid(a),
// silu'(a) = s * (1 + a * (1 - s)).
template <typename A>
C10_HOST_DEVICE inline void backward(A g, A a, A b, A& grad_a, A& grad_b) {
  const A s = A(1) / (A(1) + exp_(-a));
  grad_a = g * b * (s * (A(1) + a * (A(1) - s)));
  grad_b = g * (a * s);
}

} // namespace wheelops::silu_and_mul
