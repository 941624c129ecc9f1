// layer_norm over the last dimension and its fused backward: schemas and CPU kernels.
#include <torch/csrc/stable/library.h>

#include <optional>
#include <tuple>

#include "wheelops/kernels/norm.h"
#include "wheelops/kernels/norm_cpu.h"

namespace wheelops::layer_norm {

std::tuple<Tensor, Tensor, Tensor> layer_norm_cpu(
    const Tensor& x, std::optional<Tensor> weight, std::optional<Tensor> bias, double eps) {
  norm::Forward f = norm::cpu_impl::forward<true>(x, weight, bias, eps, true, "layer_norm");
  return {f.out, *f.mean, *f.rstd};
}

Tensor layer_norm_inference_cpu(
    const Tensor& x, std::optional<Tensor> weight, std::optional<Tensor> bias, double eps) {
  return norm::cpu_impl::forward<true>(x, weight, bias, eps, false, "layer_norm_inference").out;
}

std::tuple<std::optional<Tensor>, std::optional<Tensor>, std::optional<Tensor>>
layer_norm_backward_cpu(
    const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
    std::optional<Tensor> weight, bool x_grad, bool weight_grad, bool bias_grad) {
  return norm::cpu_impl::backward<true>(
      grad, x, mean, rstd, weight, x_grad, weight_grad, bias_grad, "layer_norm_backward");
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def(
      "layer_norm(Tensor x, Tensor? weight, Tensor? bias, float eps)"
      " -> (Tensor out, Tensor mean, Tensor rstd)");
  // layer_norm without the statistics, for calls that want no gradient.
  m.def("layer_norm_inference(Tensor x, Tensor? weight, Tensor? bias, float eps) -> Tensor");
  m.def(
      "layer_norm_backward(Tensor grad, Tensor x, Tensor mean, Tensor rstd, Tensor? weight,"
      " bool x_grad, bool weight_grad, bool bias_grad)"
      " -> (Tensor? grad_x, Tensor? grad_weight, Tensor? grad_bias)");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("layer_norm", TORCH_BOX(&layer_norm_cpu));
  m.impl("layer_norm_inference", TORCH_BOX(&layer_norm_inference_cpu));
  m.impl("layer_norm_backward", TORCH_BOX(&layer_norm_backward_cpu));
}

} // namespace wheelops::layer_norm
