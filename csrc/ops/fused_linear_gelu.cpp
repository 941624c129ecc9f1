// fused_linear_gelu(input, weight, bias, approximate) = gelu(input @ weight.T + bias)
// and its backward: schemas and CPU kernels.
//
// The CPU path is exact rather than fast: the GEMM is torch's matmul (through the
// stable ABI's dispatcher) in float32 (float64 for float64), so the pre-activation is
// never rounded to a 16-bit dtype before the GELU, and every output is rounded once.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fused_linear_gelu.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/dispatch.h"
#include "wheelops/kernels/column_sums_cpu.h"
#include "wheelops/kernels/gelu.h"
#include "wheelops/tensors.h"

namespace wheelops::fused_linear_gelu {
namespace {

ScalarType compute_type(ScalarType dtype) {
  return dtype == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
}

// `t` (contiguous) as a [rows, cols] matrix in the compute type.
Tensor matrix_in(const Tensor& t, int64_t rows, int64_t cols, ScalarType type) {
  const Tensor m = torch::stable::view(t, {rows, cols});
  return m.scalar_type() == type ? m : torch::stable::to(m, type);
}

// The GEMM input @ weight.T in the compute type: [m, n], contiguous.
Tensor gemm(const Tensor& input, const Tensor& weight, GemmShape s) {
  const ScalarType type = compute_type(input.scalar_type());
  const Tensor x = matrix_in(input, s.m, s.k, type);
  const Tensor w = matrix_in(weight, s.n, s.k, type);
  return as_contiguous(torch::stable::matmul(x, torch::stable::transpose(w, 0, 1)));
}

template <typename T, gelu::Approximate kMode>
void forward_rows(
    const acc_type<T>* h, const T* bias, T* out, T* pre, GemmShape s) {
  using A = acc_type<T>;
  const int64_t grain = cpu::kGrainSize / s.n + 1;
  cpu::parallel_range(s.m, grain, [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t base = r * s.n;
      for (int64_t c = 0; c < s.n; ++c) {
        const A u = h[base + c] + (bias != nullptr ? static_cast<A>(bias[c]) : A(0));
        out[base + c] = static_cast<T>(gelu::forward<kMode>(u));
        if (pre != nullptr) {
          pre[base + c] = static_cast<T>(u);
        }
      }
    }
  });
}

// d_pre = grad * gelu'(pre), in the compute type.
template <typename T, gelu::Approximate kMode>
void gelu_grad_rows(const T* grad, const T* pre, acc_type<T>* d_pre, GemmShape s) {
  using A = acc_type<T>;
  const int64_t grain = s.n > 0 ? cpu::kGrainSize / s.n + 1 : 1;
  cpu::parallel_range(s.m, grain, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin * s.n; i < end * s.n; ++i) {
      d_pre[i] = static_cast<A>(grad[i]) * gelu::derivative<kMode>(static_cast<A>(pre[i]));
    }
  });
}

// grad_bias[c] = sum over rows of d_pre[:, c], rows in order.
template <typename T>
void column_sums(const acc_type<T>* d_pre, T* grad_bias, GemmShape s) {
  cpu::blocked_column_sums<acc_type<T>>(
      s.m, s.n, grad_bias, [=](int64_t r, int64_t c) { return d_pre[r * s.n + c]; });
}

} // namespace

std::tuple<Tensor, Tensor> fused_linear_gelu_cpu(
    const Tensor& input, const Tensor& weight, std::optional<Tensor> bias,
    std::string approximate, bool allow_tf32, bool keep_pre_activation) {
  constexpr const char* op = "fused_linear_gelu";
  (void)allow_tf32;  // a CUDA setting; the CPU GEMM is float32 (float64) as is
  check_args(input, weight, bias, op);
  const gelu::Approximate mode = gelu::parse_approximate(approximate, op);
  const GemmShape s = gemm_shape(input, weight);
  const std::vector<int64_t> out_sizes = output_sizes(input, s.n);
  Tensor out = allocate(input, out_sizes);
  Tensor pre = allocate(input, keep_pre_activation ? out_sizes : std::vector<int64_t>{0});
  if (s.m == 0 || s.n == 0) {
    return {out, pre};
  }
  const Tensor h = gemm(as_contiguous(input), as_contiguous(weight), s);
  const std::optional<Tensor> b = as_contiguous(bias);
  dispatch_float(input.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gelu::dispatch_mode(mode, [&](auto m) {
      forward_rows<T, decltype(m)::value>(
          h.const_data_ptr<acc_type<T>>(), b ? b->const_data_ptr<T>() : nullptr,
          out.mutable_data_ptr<T>(), keep_pre_activation ? pre.mutable_data_ptr<T>() : nullptr,
          s);
    });
  });
  return {out, pre};
}

std::tuple<std::optional<Tensor>, std::optional<Tensor>, std::optional<Tensor>>
fused_linear_gelu_backward_cpu(
    const Tensor& grad, const Tensor& input, const Tensor& weight, const Tensor& pre_activation,
    std::string approximate, bool allow_tf32, bool input_grad, bool weight_grad,
    bool bias_grad) {
  constexpr const char* op = "fused_linear_gelu_backward";
  (void)allow_tf32;
  check_backward_args(grad, input, weight, pre_activation);
  const gelu::Approximate mode = gelu::parse_approximate(approximate, op);
  const GemmShape s = gemm_shape(input, weight);
  const ScalarType dtype = input.scalar_type();
  const ScalarType type = compute_type(dtype);
  const Tensor g_c = as_contiguous(grad);
  const Tensor p_c = as_contiguous(pre_activation);
  Tensor d_pre = allocate(input, {s.m, s.n}, type);
  std::optional<Tensor> grad_bias;
  if (bias_grad) {
    grad_bias = allocate(input, {s.n});
  }
  dispatch_float(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    gelu::dispatch_mode(mode, [&](auto m) {
      gelu_grad_rows<T, decltype(m)::value>(
          g_c.const_data_ptr<T>(), p_c.const_data_ptr<T>(), d_pre.mutable_data_ptr<A>(), s);
    });
    if (bias_grad) {
      column_sums<T>(d_pre.const_data_ptr<A>(), grad_bias->mutable_data_ptr<T>(), s);
    }
  });
  std::optional<Tensor> grad_input;
  std::optional<Tensor> grad_weight;
  if (input_grad) {
    // [m, n] @ [n, k]: matmul gives zeros for n == 0 and an empty result for m == 0.
    const Tensor w = matrix_in(as_contiguous(weight), s.n, s.k, type);
    const Tensor gi = torch::stable::matmul(d_pre, w);
    grad_input = torch::stable::view(as_contiguous(torch::stable::to(gi, dtype)), input.sizes());
  }
  if (weight_grad) {
    const Tensor x = matrix_in(as_contiguous(input), s.m, s.k, type);
    const Tensor gw = torch::stable::matmul(torch::stable::transpose(d_pre, 0, 1), x);
    grad_weight = as_contiguous(torch::stable::to(gw, dtype));
  }
  return {grad_input, grad_weight, grad_bias};
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def(
      "fused_linear_gelu(Tensor input, Tensor weight, Tensor? bias=None,"
      " str approximate=\"none\", bool allow_tf32=False, bool keep_pre_activation=False)"
      " -> (Tensor output, Tensor pre_activation)");
  m.def(
      "fused_linear_gelu_backward(Tensor grad, Tensor input, Tensor weight,"
      " Tensor pre_activation, str approximate=\"none\", bool allow_tf32=False,"
      " bool input_grad=True, bool weight_grad=True, bool bias_grad=True)"
      " -> (Tensor? grad_input, Tensor? grad_weight, Tensor? grad_bias)");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("fused_linear_gelu", TORCH_BOX(&fused_linear_gelu_cpu));
  m.impl("fused_linear_gelu_backward", TORCH_BOX(&fused_linear_gelu_backward_cpu));
}

} // namespace wheelops::fused_linear_gelu
