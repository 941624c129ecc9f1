// silu_and_mul (SwiGLU) forward and backward: CUDA kernels.
//
// Pure streaming, so the limit is memory bandwidth: per output element the
// forward reads two inputs and writes one (6 bytes in bf16), the backward
// reads three and writes two. Each thread moves 16-byte vectors from both
// halves of a row and stores 16-byte vectors; a 2-D grid (column vectors x
// rows, grid-stride in both) avoids a 64-bit division per element and covers
// any row count. Rows whose half length is not a multiple of the vector
// width, or unaligned views, take the same kernels with one element per
// vector. Indices are int64, so tensors over 2**31 elements are fine.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <initializer_list>
#include <vector>

#include "silu_and_mul.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/vectorized.cuh"

namespace wheelops::silu_and_mul {
namespace {

using cuda::Vec;

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kBlocksPerSm = 8;

template <typename T, int kVec>
__device__ __forceinline__ Vec<T, kVec> load(const T* p, int64_t vec_index) {
  return reinterpret_cast<const Vec<T, kVec>*>(p)[vec_index];
}

template <typename T, int kVec>
__device__ __forceinline__ void store(T* p, int64_t vec_index, const Vec<T, kVec>& v) {
  reinterpret_cast<Vec<T, kVec>*>(p)[vec_index] = v;
}

template <typename T, int kVec>
__global__ void silu_and_mul_forward_kernel(
    const T* __restrict__ x, T* __restrict__ out, int64_t rows, int64_t d) {
  using A = acc_type<T>;
  const int64_t vecs = d / kVec;
  const int64_t col_stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
  for (int64_t r = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r < rows; r += row_stride) {
    const T* gate = x + r * 2 * d;
    const T* up = gate + d;
    T* o = out + r * d;
    for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < vecs; c += col_stride) {
      const Vec<T, kVec> a = load<T, kVec>(gate, c);
      const Vec<T, kVec> b = load<T, kVec>(up, c);
      Vec<T, kVec> y;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        y.val[j] = static_cast<T>(forward(static_cast<A>(a.val[j]), static_cast<A>(b.val[j])));
      }
      store<T, kVec>(o, c, y);
    }
  }
}

template <typename T, int kVec>
__global__ void silu_and_mul_backward_kernel(
    const T* __restrict__ grad, const T* __restrict__ x, T* __restrict__ grad_x, int64_t rows,
    int64_t d) {
  using A = acc_type<T>;
  const int64_t vecs = d / kVec;
  const int64_t col_stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
  for (int64_t r = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r < rows; r += row_stride) {
    const T* g_row = grad + r * d;
    const T* gate = x + r * 2 * d;
    const T* up = gate + d;
    T* grad_gate = grad_x + r * 2 * d;
    T* grad_up = grad_gate + d;
    for (int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; c < vecs; c += col_stride) {
      const Vec<T, kVec> g = load<T, kVec>(g_row, c);
      const Vec<T, kVec> a = load<T, kVec>(gate, c);
      const Vec<T, kVec> b = load<T, kVec>(up, c);
      Vec<T, kVec> ga;
      Vec<T, kVec> gb;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        A da, db;
        backward(
            static_cast<A>(g.val[j]), static_cast<A>(a.val[j]), static_cast<A>(b.val[j]), da, db);
        ga.val[j] = static_cast<T>(da);
        gb.val[j] = static_cast<T>(db);
      }
      store<T, kVec>(grad_gate, c, ga);
      store<T, kVec>(grad_up, c, gb);
    }
  }
}

// 16-byte vectors when d and every pointer allow them. A vector never
// straddles the two halves: d is a multiple of the width, so row starts and
// the start of the second half are 16-byte aligned too.
template <typename T>
bool can_vectorize(int64_t d, std::initializer_list<const void*> pointers) {
  if (d % cuda::kVecSize<T> != 0) {
    return false;
  }
  for (const void* p : pointers) {
    if (!cuda::is_aligned_16(p)) {
      return false;
    }
  }
  return true;
}

struct Grid {
  dim3 block;
  dim3 grid;
};

// Threads along a row cover its vectors (up to a block's width), the rest of
// the block takes further rows; enough blocks to fill every SM several times.
Grid grid_for(int64_t vecs, int64_t rows, int32_t device) {
  int threads_x = 1;  // short rows: a warp spans several rows, no idle lanes
  while (threads_x < kThreads && threads_x < vecs) {
    threads_x *= 2;
  }
  const int threads_y = kThreads / threads_x;
  const int64_t wanted = int64_t{cuda::multiprocessor_count(device)} * kBlocksPerSm;
  int64_t grid_x = (vecs + threads_x - 1) / threads_x;
  grid_x = grid_x < wanted ? grid_x : wanted;
  int64_t grid_y = (wanted + grid_x - 1) / grid_x;
  const int64_t rows_y = (rows + threads_y - 1) / threads_y;
  grid_y = grid_y < rows_y ? grid_y : rows_y;
  grid_y = grid_y < kMaxGridY ? grid_y : kMaxGridY;
  grid_y = grid_y > 0 ? grid_y : 1;
  // Same number of rows for every block row (no straggling last pass).
  const int64_t passes = (rows_y + grid_y - 1) / grid_y;
  grid_y = passes > 0 ? (rows_y + passes - 1) / passes : 1;
  return {
      dim3(threads_x, threads_y),
      dim3(static_cast<unsigned int>(grid_x > 0 ? grid_x : 1),
           static_cast<unsigned int>(grid_y > 0 ? grid_y : 1))};
}

std::vector<int64_t> output_shape(const Tensor& x) {
  std::vector<int64_t> shape(x.dim());
  for (int64_t i = 0; i < x.dim(); ++i) {
    shape[i] = x.size(i);
  }
  shape.back() /= 2;
  return shape;
}

Tensor silu_and_mul_cuda(const Tensor& x) {
  check_forward_args(x);
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor x_c = torch::stable::contiguous(x);
  Tensor out = torch::stable::new_empty(x_c, output_shape(x_c));
  if (out.numel() == 0) {
    return out;
  }
  const Rows shape = rows_of(x_c);
  const cudaStream_t stream = cuda::current_stream(device, "silu_and_mul");
  dispatch_float(x_c.scalar_type(), "silu_and_mul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kVec = cuda::kVecSize<T>;
    const T* px = x_c.const_data_ptr<T>();
    T* po = out.mutable_data_ptr<T>();
    if (can_vectorize<T>(shape.d, {px, po})) {
      const Grid g = grid_for(shape.d / kVec, shape.rows, device);
      silu_and_mul_forward_kernel<T, kVec><<<g.grid, g.block, 0, stream>>>(px, po, shape.rows, shape.d);
    } else {
      const Grid g = grid_for(shape.d, shape.rows, device);
      silu_and_mul_forward_kernel<T, 1><<<g.grid, g.block, 0, stream>>>(px, po, shape.rows, shape.d);
    }
    WHEELOPS_CHECK_LAUNCH("silu_and_mul");
  });
  return out;
}

Tensor silu_and_mul_backward_cuda(const Tensor& grad, const Tensor& x) {
  check_backward_args(grad, x);
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor g_c = torch::stable::contiguous(grad);
  const Tensor x_c = torch::stable::contiguous(x);
  Tensor grad_x = torch::stable::empty_like(x_c);
  if (grad_x.numel() == 0) {
    return grad_x;
  }
  const Rows shape = rows_of(x_c);
  const cudaStream_t stream = cuda::current_stream(device, "silu_and_mul_backward");
  dispatch_float(x_c.scalar_type(), "silu_and_mul_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr int kVec = cuda::kVecSize<T>;
    const T* pg = g_c.const_data_ptr<T>();
    const T* px = x_c.const_data_ptr<T>();
    T* pgx = grad_x.mutable_data_ptr<T>();
    if (can_vectorize<T>(shape.d, {pg, px, pgx})) {
      const Grid g = grid_for(shape.d / kVec, shape.rows, device);
      silu_and_mul_backward_kernel<T, kVec>
          <<<g.grid, g.block, 0, stream>>>(pg, px, pgx, shape.rows, shape.d);
    } else {
      const Grid g = grid_for(shape.d, shape.rows, device);
      silu_and_mul_backward_kernel<T, 1>
          <<<g.grid, g.block, 0, stream>>>(pg, px, pgx, shape.rows, shape.d);
    }
    WHEELOPS_CHECK_LAUNCH("silu_and_mul_backward");
  });
  return grad_x;
}

} // namespace

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("silu_and_mul", TORCH_BOX(&silu_and_mul_cuda));
  m.impl("silu_and_mul_backward", TORCH_BOX(&silu_and_mul_backward_cuda));
}

} // namespace wheelops::silu_and_mul
