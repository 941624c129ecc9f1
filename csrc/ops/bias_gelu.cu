// bias_gelu forward and fused backward: CUDA kernels.
//
// x is viewed as [rows, cols]. A block is a tile of (column vectors) x (rows):
// each thread keeps its slice of bias in registers and walks down the rows, so
// no per-element modulo is needed. The backward writes grad_x and sums grad_x
// down the columns for grad_bias in two deterministic stages: per-block
// partial sums in a fixed order, then one pass over the partials.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <initializer_list>
#include <string>
#include <tuple>
#include <type_traits>

#include "bias_gelu.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/gelu_math.h"
#include "wheelops/vectorized.cuh"

namespace wheelops {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;

struct TileGrid {
  dim3 block;
  dim3 grid;
};

// Tile shape for `col_vecs` column vectors and `rows` rows on `device`.
TileGrid tile_grid(int64_t col_vecs, int64_t rows, int32_t device) {
  int threads_x = 32;
  while (threads_x < kThreads && threads_x < col_vecs) {
    threads_x *= 2;
  }
  const int threads_y = kThreads / threads_x;
  const int64_t grid_x = (col_vecs + threads_x - 1) / threads_x;
  const int64_t wanted_blocks = int64_t{cuda::multiprocessor_count(device)} * 8;
  int64_t grid_y = (wanted_blocks + grid_x - 1) / grid_x;
  const int64_t rows_y = (rows + threads_y - 1) / threads_y;
  grid_y = grid_y < rows_y ? grid_y : rows_y;
  grid_y = grid_y < kMaxGridY ? grid_y : kMaxGridY;
  grid_y = grid_y > 0 ? grid_y : 1;
  return {dim3(threads_x, threads_y), dim3(static_cast<unsigned int>(grid_x),
                                           static_cast<unsigned int>(grid_y))};
}

template <typename T, int kVec>
__device__ __forceinline__ cuda::Vec<T, kVec> load_vec(const T* p, int64_t vec_index) {
  return reinterpret_cast<const cuda::Vec<T, kVec>*>(p)[vec_index];
}

template <typename T, int kVec, gelu::Approximate kMode>
__global__ void bias_gelu_forward_kernel(
    const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out, int64_t rows,
    int64_t cols) {
  using A = acc_type<T>;
  const int64_t col_vec = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t col_vecs = cols / kVec;
  if (col_vec >= col_vecs) {
    return;
  }
  const cuda::Vec<T, kVec> b = load_vec<T, kVec>(bias, col_vec);
  const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
  for (int64_t r = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r < rows; r += row_stride) {
    const int64_t offset = r * col_vecs + col_vec;
    const cuda::Vec<T, kVec> v = load_vec<T, kVec>(x, offset);
    cuda::Vec<T, kVec> y;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const A u = static_cast<A>(v.val[j]) + static_cast<A>(b.val[j]);
      y.val[j] = static_cast<T>(gelu::forward<kMode>(u));
    }
    reinterpret_cast<cuda::Vec<T, kVec>*>(out)[offset] = y;
  }
}

// Writes grad_x and, per block row, the column sums of grad_x into
// partial[blockIdx.y, cols].
template <typename T, int kVec, gelu::Approximate kMode>
__global__ void bias_gelu_backward_kernel(
    const T* __restrict__ grad, const T* __restrict__ x, const T* __restrict__ bias,
    T* __restrict__ grad_x, acc_type<T>* __restrict__ partial, int64_t rows, int64_t cols) {
  using A = acc_type<T>;
  extern __shared__ unsigned char shared_bytes[];
  A* shared = reinterpret_cast<A*>(shared_bytes);  // [blockDim.y][blockDim.x][kVec]

  const int64_t col_vec = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t col_vecs = cols / kVec;
  A sums[kVec] = {};
  if (col_vec < col_vecs) {
    const cuda::Vec<T, kVec> b = load_vec<T, kVec>(bias, col_vec);
    const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
    for (int64_t r = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r < rows; r += row_stride) {
      const int64_t offset = r * col_vecs + col_vec;
      const cuda::Vec<T, kVec> g = load_vec<T, kVec>(grad, offset);
      const cuda::Vec<T, kVec> v = load_vec<T, kVec>(x, offset);
      cuda::Vec<T, kVec> dx;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const A u = static_cast<A>(v.val[j]) + static_cast<A>(b.val[j]);
        const A d = static_cast<A>(g.val[j]) * gelu::derivative<kMode>(u);
        dx.val[j] = static_cast<T>(d);
        sums[j] += d;
      }
      reinterpret_cast<cuda::Vec<T, kVec>*>(grad_x)[offset] = dx;
    }
  }
  const int slot = (threadIdx.y * blockDim.x + threadIdx.x) * kVec;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    shared[slot + j] = sums[j];
  }
  __syncthreads();
  if (threadIdx.y == 0 && col_vec < col_vecs) {
    // Fixed summation order: the result does not depend on scheduling.
    for (int ty = 1; ty < static_cast<int>(blockDim.y); ++ty) {
      const int other = (ty * blockDim.x + threadIdx.x) * kVec;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        sums[j] += shared[other + j];
      }
    }
    A* out = partial + int64_t{blockIdx.y} * cols + col_vec * kVec;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      out[j] = sums[j];
    }
  }
}

template <typename T>
__global__ void sum_partials_kernel(
    const acc_type<T>* __restrict__ partial, T* __restrict__ grad_bias, int64_t splits,
    int64_t cols) {
  using A = acc_type<T>;
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < cols; c += stride) {
    A total = A(0);
    for (int64_t s = 0; s < splits; ++s) {
      total += partial[s * cols + c];
    }
    grad_bias[c] = static_cast<T>(total);
  }
}

// 16-byte vectors when the row length and every pointer allow them.
template <typename T>
bool can_vectorize(int64_t cols, std::initializer_list<const void*> pointers) {
  if (cols % cuda::kVecSize<T> != 0) {
    return false;
  }
  for (const void* p : pointers) {
    if (!cuda::is_aligned_16(p)) {
      return false;
    }
  }
  return true;
}

template <typename T, int kVec, gelu::Approximate kMode>
void launch_forward(
    const T* x, const T* bias, T* out, RowsCols shape, int32_t device, cudaStream_t stream) {
  const TileGrid tg = tile_grid(shape.cols / kVec, shape.rows, device);
  bias_gelu_forward_kernel<T, kVec, kMode>
      <<<tg.grid, tg.block, 0, stream>>>(x, bias, out, shape.rows, shape.cols);
  WHEELOPS_CHECK_LAUNCH("bias_gelu");
}

template <typename T, int kVec, gelu::Approximate kMode>
void launch_backward(
    const T* grad, const T* x, const T* bias, T* grad_x, T* grad_bias, const Tensor& like,
    RowsCols shape, int32_t device, cudaStream_t stream) {
  using A = acc_type<T>;
  constexpr auto kAccType = std::is_same_v<A, double> ? ScalarType::Double : ScalarType::Float;
  const TileGrid tg = tile_grid(shape.cols / kVec, shape.rows, device);
  const int64_t splits = shape.rows > 0 ? tg.grid.y : 0;
  // Workspace from torch's caching allocator, on the current stream.
  Tensor partial = torch::stable::new_empty(like, {splits > 0 ? splits : 1, shape.cols}, kAccType);
  A* partial_ptr = partial.mutable_data_ptr<A>();
  if (splits > 0) {
    const size_t shared = size_t{tg.block.x} * tg.block.y * kVec * sizeof(A);
    bias_gelu_backward_kernel<T, kVec, kMode><<<tg.grid, tg.block, shared, stream>>>(
        grad, x, bias, grad_x, partial_ptr, shape.rows, shape.cols);
    WHEELOPS_CHECK_LAUNCH("bias_gelu_backward");
  }
  const unsigned int blocks = cuda::grid_for(shape.cols, kThreads, device);
  sum_partials_kernel<T><<<blocks, kThreads, 0, stream>>>(partial_ptr, grad_bias, splits, shape.cols);
  WHEELOPS_CHECK_LAUNCH("bias_gelu_backward");
}

} // namespace

Tensor bias_gelu_cuda(const Tensor& x, const Tensor& bias, std::string approximate) {
  check_bias_gelu_args(x, bias, "bias_gelu");
  const gelu::Approximate mode = gelu::parse_approximate(approximate, "bias_gelu");
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor x_c = torch::stable::contiguous(x);
  const Tensor b_c = torch::stable::contiguous(bias);
  Tensor out = torch::stable::empty_like(x_c);
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
    const bool vec = can_vectorize<T>(shape.cols, {px, pb, po});
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
  const Tensor g_c = torch::stable::contiguous(grad);
  const Tensor x_c = torch::stable::contiguous(x);
  const Tensor b_c = torch::stable::contiguous(bias);
  Tensor grad_x = torch::stable::empty_like(x_c);
  Tensor grad_bias = torch::stable::empty_like(b_c);
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
    const bool vec = can_vectorize<T>(shape.cols, {pg, px, pb, pgx});
    gelu::dispatch_mode(mode, [&](auto m) {
      constexpr gelu::Approximate kMode = decltype(m)::value;
      if (vec) {
        launch_backward<T, cuda::kVecSize<T>, kMode>(
            pg, px, pb, pgx, pgb, x_c, shape, device, stream);
      } else {
        launch_backward<T, 1, kMode>(pg, px, pb, pgx, pgb, x_c, shape, device, stream);
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
