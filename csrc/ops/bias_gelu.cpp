// bias_gelu(x, bias, approximate) = gelu(x + bias) over the last dimension,
// and its fused backward: schemas and CPU kernels.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <string>
#include <tuple>
#include <vector>

#include "bias_gelu.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/dispatch.h"
#include "wheelops/kernels/column_sums_cpu.h"
#include "wheelops/kernels/gelu.h"
#include "wheelops/tensors.h"

namespace wheelops::bias_gelu {
namespace {

template <typename T, gelu::Approximate kMode>
void forward_rows(const T* x, const T* bias, T* out, RowsCols shape) {
  using A = acc_type<T>;
  const int64_t grain = shape.cols > 0 ? cpu::kGrainSize / shape.cols + 1 : 1;
  cpu::parallel_range(shape.rows, grain, [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t base = r * shape.cols;
      for (int64_t c = 0; c < shape.cols; ++c) {
        const A u = static_cast<A>(x[base + c]) + static_cast<A>(bias[c]);
        out[base + c] = static_cast<T>(gelu::forward<kMode>(u));
      }
    }
  });
}

// grad_x = grad * gelu'(x + bias), and grad_bias its column sums.
template <typename T, gelu::Approximate kMode>
void backward_columns(
    const T* grad, const T* x, const T* bias, T* grad_x, T* grad_bias, RowsCols shape) {
  using A = acc_type<T>;
  cpu::blocked_column_sums<A>(shape.rows, shape.cols, grad_bias, [=](int64_t r, int64_t c) {
    const int64_t i = r * shape.cols + c;
    const A u = static_cast<A>(x[i]) + static_cast<A>(bias[c]);
    const A g = static_cast<A>(grad[i]) * gelu::derivative<kMode>(u);
    grad_x[i] = static_cast<T>(g);
    return g;
  });
}

} // namespace

Tensor bias_gelu_cpu(const Tensor& x, const Tensor& bias, std::string approximate) {
  check_args(x, bias, "bias_gelu");
  const gelu::Approximate mode = gelu::parse_approximate(approximate, "bias_gelu");
  const Tensor x_c = as_contiguous(x);
  const Tensor b_c = as_contiguous(bias);
  Tensor out = allocate_like(x_c);
  dispatch_float(x_c.scalar_type(), "bias_gelu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    gelu::dispatch_mode(mode, [&](auto m) {
      forward_rows<T, decltype(m)::value>(
          x_c.const_data_ptr<T>(), b_c.const_data_ptr<T>(), out.mutable_data_ptr<T>(),
          rows_cols(x_c));
    });
  });
  return out;
}

std::tuple<Tensor, Tensor> bias_gelu_backward_cpu(
    const Tensor& grad, const Tensor& x, const Tensor& bias, std::string approximate) {
  check_backward_args(grad, x, bias);
  const gelu::Approximate mode = gelu::parse_approximate(approximate, "bias_gelu_backward");
  const Tensor g_c = as_contiguous(grad);
  const Tensor x_c = as_contiguous(x);
  const Tensor b_c = as_contiguous(bias);
  Tensor grad_x = allocate_like(x_c);
  Tensor grad_bias = allocate_like(b_c);
  dispatch_float(x_c.scalar_type(), "bias_gelu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    gelu::dispatch_mode(mode, [&](auto m) {
      backward_columns<T, decltype(m)::value>(
          g_c.const_data_ptr<T>(), x_c.const_data_ptr<T>(), b_c.const_data_ptr<T>(),
          grad_x.mutable_data_ptr<T>(), grad_bias.mutable_data_ptr<T>(), rows_cols(x_c));
    });
  });
  return {grad_x, grad_bias};
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("bias_gelu(Tensor x, Tensor bias, str approximate=\"none\") -> Tensor");
  m.def(
      "bias_gelu_backward(Tensor grad, Tensor x, Tensor bias, str approximate=\"none\")"
      " -> (Tensor, Tensor)");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("bias_gelu", TORCH_BOX(&bias_gelu_cpu));
  m.impl("bias_gelu_backward", TORCH_BOX(&bias_gelu_backward_cpu));
}

} // namespace wheelops::bias_gelu
