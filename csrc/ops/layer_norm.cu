// layer_norm forward and fused backward: CUDA entry points (the kernels are the norm
// family's, wheelops/kernels/norm_cuda.cuh).
#include <torch/csrc/stable/library.h>

#include <optional>
#include <tuple>

#include "wheelops/kernels/norm_cuda.cuh"

namespace wheelops::layer_norm {

std::tuple<Tensor, Tensor, Tensor> layer_norm_cuda(
    const Tensor& x, std::optional<Tensor> weight, std::optional<Tensor> bias, double eps) {
  norm::Forward f = norm::cuda_impl::forward<true>(x, weight, bias, eps, true, "layer_norm");
  return {f.out, *f.mean, *f.rstd};
}

Tensor layer_norm_inference_cuda(
    const Tensor& x, std::optional<Tensor> weight, std::optional<Tensor> bias, double eps) {
  return norm::cuda_impl::forward<true>(x, weight, bias, eps, false, "layer_norm_inference").out;
}

std::tuple<std::optional<Tensor>, std::optional<Tensor>, std::optional<Tensor>>
layer_norm_backward_cuda(
    const Tensor& grad, const Tensor& x, const Tensor& mean, const Tensor& rstd,
    std::optional<Tensor> weight, bool x_grad, bool weight_grad, bool bias_grad) {
  return norm::cuda_impl::backward<true>(
      grad, x, mean, rstd, weight, x_grad, weight_grad, bias_grad, "layer_norm_backward");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("layer_norm", TORCH_BOX(&layer_norm_cuda));
  m.impl("layer_norm_inference", TORCH_BOX(&layer_norm_inference_cuda));
  m.impl("layer_norm_backward", TORCH_BOX(&layer_norm_backward_cuda));
}

} // namespace wheelops::layer_norm
