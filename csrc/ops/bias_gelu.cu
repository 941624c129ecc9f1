// bias_gelu forward and fused backward: CUDA kernels. The tiles and the backward are
// wheelops/gelu_columns.cuh's (fused_linear_gelu's backward runs the same).
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <string>
#include <tuple>
#include <type_traits>

#include "bias_gelu.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/gelu_columns.cuh"
#include "wheelops/gelu_math.h"
#include "wheelops/occupancy.cuh"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops {
namespace {

using gelu_columns::kRowsPerStep;
using gelu_columns::kThreads;
using gelu_columns::tile_grid;
using gelu_columns::TileGrid;

// Resident blocks per SM the forward's register budget must allow (why: the
// backward's kBackwardMinBlocks in gelu_columns.cuh).
template <typename T>
constexpr int kForwardMinBlocks = sizeof(T) == 8 ? 1 : 6;

template <typename T, int kVec, gelu::Approximate kMode>
__global__ void __launch_bounds__(kThreads, kForwardMinBlocks<T>) bias_gelu_forward_kernel(
    const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out, int64_t rows,
    int64_t cols) {
  using A = acc_type<T>;
  const int64_t col_vec = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t col_vecs = cols / kVec;
  if (col_vec >= col_vecs) {
    return;
  }
  const cuda::Vec<T, kVec> b = cuda::load_vec<T, kVec>(bias, col_vec);
  const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
  for (int64_t r0 = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r0 < rows;
       r0 += row_stride * kRowsPerStep) {
    cuda::Vec<T, kVec> v[kRowsPerStep];
#pragma unroll
    for (int k = 0; k < kRowsPerStep; ++k) {
      const int64_t r = r0 + k * row_stride;
      if (r < rows) {
        v[k] = cuda::load_vec<T, kVec>(x, r * col_vecs + col_vec);
      }
    }
#pragma unroll
    for (int k = 0; k < kRowsPerStep; ++k) {
      const int64_t r = r0 + k * row_stride;
      if (r < rows) {
        cuda::Vec<T, kVec> y;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const A u = static_cast<A>(v[k].val[j]) + static_cast<A>(b.val[j]);
          y.val[j] = static_cast<T>(gelu::forward<kMode>(u));
        }
        reinterpret_cast<cuda::Vec<T, kVec>*>(out)[r * col_vecs + col_vec] = y;
      }
    }
  }
}

template <typename T, int kVec, gelu::Approximate kMode>
void launch_forward(
    const T* x, const T* bias, T* out, RowsCols shape, int32_t device, cudaStream_t stream) {
  static cuda::OccupancyCache cache{};
  const auto kernel = bias_gelu_forward_kernel<T, kVec, kMode>;
  const int per_sm = cuda::resident_blocks_per_sm(cache, kernel, kThreads, 0, device);
  const TileGrid tg = tile_grid(shape.cols / kVec, shape.rows, per_sm, device);
  kernel<<<tg.grid, tg.block, 0, stream>>>(x, bias, out, shape.rows, shape.cols);
  WHEELOPS_CHECK_LAUNCH("bias_gelu");
}

} // namespace

Tensor bias_gelu_cuda(const Tensor& x, const Tensor& bias, std::string approximate) {
  check_bias_gelu_args(x, bias, "bias_gelu");
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
        launch_forward<T, cuda::kVecSize<T>, kMode>(px, pb, po, shape, device, stream);
      } else {
        launch_forward<T, 1, kMode>(px, pb, po, shape, device, stream);
      }
    });
  });
  return out;
}

std::tuple<Tensor, Tensor> bias_gelu_backward_cuda(
    const Tensor& grad, const Tensor& x, const Tensor& bias, std::string approximate) {
  check_bias_gelu_backward_args(grad, x, bias);
  const gelu::Approximate mode = gelu::parse_approximate(approximate, "bias_gelu_backward");
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor g_c = as_contiguous(grad);
  const Tensor x_c = as_contiguous(x);
  const Tensor b_c = as_contiguous(bias);
  Tensor grad_x = allocate_like(x_c);
  Tensor grad_bias = allocate_like(b_c);
  const RowsCols shape = rows_cols(x_c);
  if (shape.cols == 0) {
    return {grad_x, grad_bias};
  }
  const cudaStream_t stream = cuda::current_stream(device, "bias_gelu_backward");
  dispatch_float(x_c.scalar_type(), "bias_gelu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = g_c.const_data_ptr<T>();
    const T* px = x_c.const_data_ptr<T>();
    const T* pb = b_c.const_data_ptr<T>();
    T* pgx = grad_x.mutable_data_ptr<T>();
    T* pgb = grad_bias.mutable_data_ptr<T>();
    const bool vec = cuda::can_vectorize<T>(shape.cols, {pg, px, pb, pgx});
    gelu::dispatch_mode(mode, [&](auto m) {
      constexpr gelu::Approximate kMode = decltype(m)::value;
      if (vec) {
        gelu_columns::launch_backward<T, cuda::kVecSize<T>, kMode>(
            pg, px, pb, pgx, pgb, x_c, shape, device, stream, "bias_gelu_backward");
      } else {
        gelu_columns::launch_backward<T, 1, kMode>(
            pg, px, pb, pgx, pgb, x_c, shape, device, stream, "bias_gelu_backward");
      }
    });
  });
  return {grad_x, grad_bias};
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("bias_gelu", TORCH_BOX(&bias_gelu_cuda));
  m.impl("bias_gelu_backward", TORCH_BOX(&bias_gelu_backward_cuda));
}

} // namespace wheelops
