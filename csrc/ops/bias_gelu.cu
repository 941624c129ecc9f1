// bias_gelu forward and fused backward: CUDA kernels.
//
// x is viewed as [rows, cols]. The forward takes one vector per thread and finds
// its bias by the column. The backward is the GELU family's (wheelops/kernels/
// gelu_backward.cu), which fused_linear_gelu's backward runs too.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <optional>
#include <string>
#include <tuple>

#include "bias_gelu.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/kernels/gelu_16bit.cuh"
#include "wheelops/kernels/gelu_backward.h"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops::bias_gelu {
namespace {

constexpr int kThreads = 256;

// One vector of x per thread over the whole tensor (a grid-stride loop only past
// CUDA's grid limit), its bias vector found by the column: the tile grid it
// replaced (a thread down the rows of a column, two rows in flight, at most 40
// registers) ran float 4096 x 16384 at 212 us against this one's 183 (H100).
template <typename T, int kVec, gelu::Approximate kMode>
__global__ void __launch_bounds__(kThreads) bias_gelu_forward_kernel(
    const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out, int64_t rows,
    int64_t cols) {
  using A = acc_type<T>;
  const int64_t col_vecs = cols / kVec;
  const int64_t n_vec = rows * col_vecs;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n_vec;
       i += int64_t{gridDim.x} * blockDim.x) {
    const cuda::Vec<T, kVec> v = cuda::load_vec<T, kVec>(x, i);
    const cuda::Vec<T, kVec> b = cuda::load_vec<T, kVec>(bias, i % col_vecs);
    cuda::Vec<T, kVec> y;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const A u = static_cast<A>(v.val[j]) + static_cast<A>(b.val[j]);
      y.val[j] = static_cast<T>(gelu::forward_of<T, kMode>(u));
    }
    cuda::store_vec<T, kVec>(out, i, y);
  }
}

template <typename T, int kVec, gelu::Approximate kMode>
void launch_forward(const T* x, const T* bias, T* out, RowsCols shape, cudaStream_t stream) {
  const unsigned int blocks = cuda::one_pass_grid(shape.rows * (shape.cols / kVec), kThreads);
  bias_gelu_forward_kernel<T, kVec, kMode>
      <<<blocks, kThreads, 0, stream>>>(x, bias, out, shape.rows, shape.cols);
  WHEELOPS_CHECK_LAUNCH("bias_gelu");
}

} // namespace

Tensor bias_gelu_cuda(const Tensor& x, const Tensor& bias, std::string approximate) {
  check_args(x, bias, "bias_gelu");
  const gelu::Approximate mode = gelu::parse_approximate(approximate, "bias_gelu");
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor x_c = as_contiguous(x);
  const Tensor b_c = as_contiguous(bias);
  Tensor out = allocate_like(x_c);
  const RowsCols shape = rows_cols(x_c);
  if (x_c.numel() == 0) {
    return out;
  }
  const cudaStream_t stream = cuda::current_stream(device, "bias_gelu");
  dispatch_float(x_c.scalar_type(), "bias_gelu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x_c.const_data_ptr<T>();
    const T* pb = b_c.const_data_ptr<T>();
    T* po = out.mutable_data_ptr<T>();
    const bool vec = cuda::can_vectorize<T>(shape.cols, {px, pb, po});
    gelu::dispatch_mode(mode, [&](auto m) {
      constexpr gelu::Approximate kMode = decltype(m)::value;
      if (vec) {
        launch_forward<T, cuda::kVecSize<T>, kMode>(px, pb, po, shape, stream);
      } else {
        launch_forward<T, 1, kMode>(px, pb, po, shape, stream);
      }
    });
  });
  return out;
}

std::tuple<Tensor, Tensor> bias_gelu_backward_cuda(
    const Tensor& grad, const Tensor& x, const Tensor& bias, std::string approximate) {
  check_backward_args(grad, x, bias);
  const gelu::Approximate mode = gelu::parse_approximate(approximate, "bias_gelu_backward");
  torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  const Tensor g_c = as_contiguous(grad);
  const Tensor x_c = as_contiguous(x);
  const std::optional<Tensor> b_c = as_contiguous(bias);
  Tensor grad_x = allocate_like(x_c);
  std::optional<Tensor> grad_bias = allocate_like(*b_c);
  gelu::backward_into(g_c, x_c, b_c, grad_x, grad_bias, mode, "bias_gelu_backward");
  return {grad_x, *grad_bias};
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("bias_gelu", TORCH_BOX(&bias_gelu_cuda));
  m.impl("bias_gelu_backward", TORCH_BOX(&bias_gelu_backward_cuda));
}

} // namespace wheelops::bias_gelu
