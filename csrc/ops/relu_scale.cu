// relu_scale(x, alpha) = max(x, 0) * alpha, fused: CUDA kernel.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "relu_scale.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops {
namespace {

template <typename A>
struct ReluScaleOp {
  A alpha;
  __device__ A operator()(A x) const {
    return relu_scale_value(x, alpha);
  }
};

template <typename A>
struct ReluScaleGradOp {
  A alpha;
  __device__ A operator()(A grad, A x) const {
    return relu_scale_grad_value(grad, x, alpha);
  }
};

} // namespace

Tensor relu_scale_cuda(const Tensor& x, double alpha) {
  check_relu_scale_args(x);
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor x_c = as_contiguous(x);
  Tensor out = allocate_like(x_c);
  const cudaStream_t stream = cuda::current_stream(device, "relu_scale");
  dispatch_float(x_c.scalar_type(), "relu_scale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    cuda::Inputs<T, 1> in{{x_c.const_data_ptr<T>()}};
    cuda::launch_elementwise(
        out.mutable_data_ptr<T>(), in, x_c.numel(), ReluScaleOp<A>{round_to<A>(alpha)},
        device, stream, "relu_scale");
  });
  return out;
}

Tensor relu_scale_backward_cuda(const Tensor& grad, const Tensor& x, double alpha) {
  check_relu_scale_backward_args(grad, x);
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor g_c = as_contiguous(grad);
  const Tensor x_c = as_contiguous(x);
  Tensor grad_x = allocate_like(x_c);
  const cudaStream_t stream = cuda::current_stream(device, "relu_scale_backward");
  dispatch_float(x_c.scalar_type(), "relu_scale_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    cuda::Inputs<T, 2> in{{g_c.const_data_ptr<T>(), x_c.const_data_ptr<T>()}};
    cuda::launch_elementwise(
        grad_x.mutable_data_ptr<T>(), in, x_c.numel(),
        ReluScaleGradOp<A>{round_to<A>(alpha)}, device, stream, "relu_scale_backward");
  });
  return grad_x;
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("relu_scale", TORCH_BOX(&relu_scale_cuda));
  m.impl("relu_scale_backward", TORCH_BOX(&relu_scale_backward_cuda));
}

} // namespace wheelops
