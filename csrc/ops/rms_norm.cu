// rms_norm forward and fused backward: CUDA entry points (the kernels are the norm
// family's, wheelops/kernels/norm_cuda.cuh).
#include <torch/csrc/stable/library.h>

#include <optional>
#include <tuple>

#include "wheelops/kernels/norm_cuda.cuh"

namespace wheelops::rms_norm {

std::tuple<Tensor, Tensor> rms_norm_cuda(
    const Tensor& x, std::optional<Tensor> weight, double eps) {
  norm::Forward f =
      norm::cuda_impl::forward<false>(x, weight, std::nullopt, eps, true, "rms_norm");
  return {f.out, *f.rstd};
}

Tensor rms_norm_inference_cuda(const Tensor& x, std::optional<Tensor> weight, double eps) {
  return norm::cuda_impl::forward<false>(
             x, weight, std::nullopt, eps, false, "rms_norm_inference")
      .out;
}

std::tuple<std::optional<Tensor>, std::optional<Tensor>> rms_norm_backward_cuda(
    const Tensor& grad, const Tensor& x, const Tensor& rstd, std::optional<Tensor> weight,
    bool x_grad, bool weight_grad) {
  auto [grad_x, grad_w, grad_b] = norm::cuda_impl::backward<false>(
      grad, x, std::nullopt, rstd, weight, x_grad, weight_grad, false, "rms_norm_backward");
  return {grad_x, grad_w};
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("rms_norm", TORCH_BOX(&rms_norm_cuda));
  m.impl("rms_norm_inference", TORCH_BOX(&rms_norm_inference_cuda));
  m.impl("rms_norm_backward", TORCH_BOX(&rms_norm_backward_cuda));
}

} // namespace wheelops::rms_norm
