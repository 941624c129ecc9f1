// rms_norm over the last dimension and its fused backward: schemas and CPU kernels.
#include <torch/csrc/stable/library.h>

#include <optional>
#include <tuple>

#include "wheelops/kernels/norm.h"
#include "wheelops/kernels/norm_cpu.h"

namespace wheelops::rms_norm {

std::tuple<Tensor, Tensor> rms_norm_cpu(
    const Tensor& x, std::optional<Tensor> weight, double eps) {
  norm::Forward f =
      norm::cpu_impl::forward<false>(x, weight, std::nullopt, eps, true, "rms_norm");
  return {f.out, *f.rstd};
}

Tensor rms_norm_inference_cpu(const Tensor& x, std::optional<Tensor> weight, double eps) {
  return norm::cpu_impl::forward<false>(x, weight, std::nullopt, eps, false, "rms_norm_inference")
      .out;
}

std::tuple<std::optional<Tensor>, std::optional<Tensor>> rms_norm_backward_cpu(
    const Tensor& grad, const Tensor& x, const Tensor& rstd, std::optional<Tensor> weight,
    bool x_grad, bool weight_grad) {
  auto [grad_x, grad_w, grad_b] = norm::cpu_impl::backward<false>(
      grad, x, std::nullopt, rstd, weight, x_grad, weight_grad, false, "rms_norm_backward");
  return {grad_x, grad_w};
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("rms_norm(Tensor x, Tensor? weight, float eps) -> (Tensor out, Tensor rstd)");
  // rms_norm without the statistics, for calls that want no gradient.
  m.def("rms_norm_inference(Tensor x, Tensor? weight, float eps) -> Tensor");
  m.def(
      "rms_norm_backward(Tensor grad, Tensor x, Tensor rstd, Tensor? weight, bool x_grad,"
      " bool weight_grad) -> (Tensor? grad_x, Tensor? grad_weight)");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("rms_norm", TORCH_BOX(&rms_norm_cpu));
  m.impl("rms_norm_inference", TORCH_BOX(&rms_norm_inference_cpu));
  m.impl("rms_norm_backward", TORCH_BOX(&rms_norm_backward_cpu));
}

} // namespace wheelops::rms_norm
