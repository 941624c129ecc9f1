// Argument checks, shapes and the host set-up shared by layer_norm and rms_norm
// (CPU and CUDA): each backend gets its tensors checked, contiguous and allocated
// from here and only launches its kernels.
//
// Both ops normalize over the last dimension of x, viewed as [rows, cols], and
// save per-row float32 statistics (float64 for float64 x) for the backward.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <cmath>
#include <optional>

#include "wheelops/tensor_checks.h"
#include "wheelops/tensors.h"

namespace wheelops::norm {

// The dtype of the saved mean/rstd: float32, or float64 for float64 x.
inline ScalarType stats_dtype(ScalarType x_dtype) {
  return x_dtype == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
}

inline void check_x(const Tensor& x, const char* op) {
  check_float_tensor(x, op, "x");
  WHEELOPS_CHECK(
      x.dim() >= 1, "wheelops.", op, ": argument 'x' must have at least one dimension");
}

// weight / bias: absent, or [cols] with x's dtype and device.
inline void check_param(
    const std::optional<Tensor>& p, const char* name, const Tensor& x, const char* op) {
  if (!p.has_value()) {
    return;
  }
  check_float_tensor(*p, op, name);
  check_same_device(x, "x", *p, name, op);
  check_same_dtype(x, "x", *p, name, op);
  const int64_t cols = x.size(x.dim() - 1);
  WHEELOPS_CHECK(
      p->dim() == 1 && p->size(0) == cols, "wheelops.", op, ": argument '", name,
      "' must have shape [", cols, "] (the last dimension of 'x'), got ", shape_string(*p));
}

inline void check_eps(double eps, const char* op) {
  WHEELOPS_CHECK(
      eps >= 0.0 && !std::isnan(eps), "wheelops.", op,
      ": argument 'eps' must be a non-negative number, got ", eps);
}

// A per-row statistic (mean or rstd) saved by the forward: [rows], stats dtype.
inline void check_stat(const Tensor& s, const char* name, const Tensor& x, const char* op) {
  check_same_device(x, "x", s, name, op);
  const ScalarType want = stats_dtype(x.scalar_type());
  WHEELOPS_CHECK(
      s.scalar_type() == want, "wheelops.", op, ": argument '", name, "' must have dtype ",
      torch::headeronly::toString(want), " for x of dtype ",
      torch::headeronly::toString(x.scalar_type()), ", got ",
      torch::headeronly::toString(s.scalar_type()));
  const int64_t rows = rows_cols(x).rows;
  WHEELOPS_CHECK(
      s.dim() == 1 && s.size(0) == rows, "wheelops.", op, ": argument '", name,
      "' must have shape [", rows, "] (one value per row of 'x'), got ", shape_string(s));
}

inline void check_backward_args(
    const Tensor& grad, const Tensor& x, const std::optional<Tensor>& mean, const Tensor& rstd,
    const std::optional<Tensor>& weight, bool weight_grad, const char* op) {
  check_x(x, op);
  check_float_tensor(grad, op, "grad");
  check_same_device(grad, "grad", x, "x", op);
  check_same_dtype(grad, "grad", x, "x", op);
  check_same_shape(grad, "grad", x, "x", op);
  if (mean.has_value()) {
    check_stat(*mean, "mean", x, op);
  }
  check_stat(rstd, "rstd", x, op);
  check_param(weight, "weight", x, op);
  WHEELOPS_CHECK(
      weight.has_value() || !weight_grad, "wheelops.", op,
      ": the gradient of 'weight' was requested but 'weight' is None");
}

template <typename T>
const T* data_or_null(const std::optional<Tensor>& t) {
  return t.has_value() ? t->const_data_ptr<T>() : nullptr;
}

template <typename T>
T* mutable_data_or_null(std::optional<Tensor>& t) {
  return t.has_value() ? t->mutable_data_ptr<T>() : nullptr;
}

// A forward's checked, contiguous inputs and its allocated outputs: out, and the
// statistics the backward needs when `stats` (layer_norm's mean and rstd, rms_norm's
// rstd; the inference ops, run when no gradient is wanted, allocate none).
struct Forward {
  Tensor x;
  std::optional<Tensor> weight, bias;
  RowsCols shape;
  Tensor out;
  std::optional<Tensor> mean, rstd;
};

template <bool kCentered>
Forward prepare_forward(
    const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    double eps, bool stats, const char* op) {
  check_x(x, op);
  check_param(weight, "weight", x, op);
  check_param(bias, "bias", x, op);
  check_eps(eps, op);
  const Tensor x_c = as_contiguous(x);
  const RowsCols shape = rows_cols(x_c);
  Forward f{x_c, as_contiguous(weight), as_contiguous(bias), shape, allocate_like(x_c),
            std::nullopt, std::nullopt};
  if (stats) {
    const ScalarType sdt = stats_dtype(x_c.scalar_type());
    if constexpr (kCentered) {
      f.mean = allocate(x_c, {shape.rows}, sdt);
    }
    f.rstd = allocate(x_c, {shape.rows}, sdt);
  }
  return f;
}

// A backward's checked, contiguous inputs and the gradients asked for, allocated.
struct Backward {
  Tensor grad, x;
  std::optional<Tensor> mean;
  Tensor rstd;
  std::optional<Tensor> weight;
  RowsCols shape;
  std::optional<Tensor> grad_x, grad_weight, grad_bias;
};

inline Backward prepare_backward(
    const Tensor& grad, const Tensor& x, const std::optional<Tensor>& mean, const Tensor& rstd,
    const std::optional<Tensor>& weight, bool x_grad, bool weight_grad, bool bias_grad,
    const char* op) {
  check_backward_args(grad, x, mean, rstd, weight, weight_grad, op);
  const Tensor x_c = as_contiguous(x);
  Backward b{as_contiguous(grad), x_c, as_contiguous(mean), as_contiguous(rstd),
             as_contiguous(weight), rows_cols(x_c), std::nullopt, std::nullopt, std::nullopt};
  if (x_grad) {
    b.grad_x = allocate_like(b.x);
  }
  if (weight_grad) {
    b.grad_weight = allocate(b.x, {b.shape.cols});
  }
  if (bias_grad) {
    b.grad_bias = allocate(b.x, {b.shape.cols});
  }
  return b;
}

} // namespace wheelops::norm
