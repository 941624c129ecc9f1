// silu_and_mul (SwiGLU) forward and backward: CUDA kernels.
//
// Pure streaming, so the limit is memory bandwidth: per output element the
// forward reads two inputs and writes one (6 bytes in bf16), the backward
// reads three and writes two. Each thread moves 16-byte vectors from both
// halves of a row, one output vector per thread (a division per vector finds
// its row), forward and backward. Rows whose half length is not a multiple of
// the vector width, or unaligned views, take the same kernels with one element
// per vector. Indices are int64, so tensors over 2**31 elements are fine.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <vector>

#include "silu_and_mul.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops::silu_and_mul {
namespace {

using cuda::Vec;

constexpr int kThreads = 256;

// silu(a) * b for the forward kernel. A bf16 output element moves 6 bytes, so
// the exact expf and IEEE division (~20 instructions) took a large share of
// the issue slots at full bandwidth (bf16 ran at 68-80% of copy bandwidth, float
// at 90-94%). For 16-bit types: __expf (one multiply and MUFU.EX2; a flushed
// denormal only meets 1 + e) and a correctly rounded reciprocal, far more
// accurate than the 8-11 bit result. inf/NaN: a = -inf gives -inf * b * 0 =
// NaN and a = +inf gives inf * b, as the exact formula does.
template <typename T, typename A>
__device__ __forceinline__ A forward_value(A a, A b) {
  if constexpr (sizeof(T) == 2) {
    return a * b * __frcp_rn(1.0f + __expf(-a));
  } else {
    return forward(a, b);
  }
}

// One output vector per thread over the whole tensor (a grid-stride loop only
// past CUDA's grid limit), its row and column from one division. The earlier
// 2-D grid of one resident wave, two rows in flight per thread, ran float
// 4096 x (2 x 16384) 19% slower (H200): fewer resident threads, and each
// thread waited on its own loads.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads) silu_and_mul_forward_kernel(
    const T* __restrict__ x, T* __restrict__ out, int64_t rows, int64_t d) {
  using A = acc_type<T>;
  const int64_t vecs = d / kVec;
  const int64_t n_vec = rows * vecs;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n_vec;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / vecs;
    const int64_t c = i - r * vecs;
    const T* gate = x + r * 2 * d;
    const Vec<T, kVec> a = cuda::load_vec<T, kVec>(gate, c);
    const Vec<T, kVec> b = cuda::load_vec<T, kVec>(gate + d, c);
    Vec<T, kVec> y;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      y.val[j] =
          static_cast<T>(forward_value<T>(static_cast<A>(a.val[j]), static_cast<A>(b.val[j])));
    }
    cuda::store_vec<T, kVec>(out, i, y);
  }
}

// The same shape for the backward: one vector of grad per thread, the two halves'
// vectors of its row read and written (a 2-D grid of one resident wave ran 4-11%
// slower, float 4096 x (2 x 16384): 499 us against 446, H100).
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads) silu_and_mul_backward_kernel(
    const T* __restrict__ grad, const T* __restrict__ x, T* __restrict__ grad_x, int64_t rows,
    int64_t d) {
  using A = acc_type<T>;
  const int64_t vecs = d / kVec;
  const int64_t n_vec = rows * vecs;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n_vec;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / vecs;
    const int64_t c = i - r * vecs;
    const int64_t gate = r * 2 * vecs + c;  // in vectors; the up half is vecs further
    const Vec<T, kVec> g = cuda::load_vec<T, kVec>(grad, i);
    const Vec<T, kVec> a = cuda::load_vec<T, kVec>(x, gate);
    const Vec<T, kVec> b = cuda::load_vec<T, kVec>(x, gate + vecs);
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
    cuda::store_vec<T, kVec>(grad_x, gate, ga);
    cuda::store_vec<T, kVec>(grad_x, gate + vecs, gb);
  }
}

Tensor silu_and_mul_cuda(const Tensor& x) {
  check_forward_args(x);
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor x_c = as_contiguous(x);
  Tensor out = allocate(x_c, output_shape(x_c));
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
    // A vector never straddles the two halves: d is a multiple of the width, so
    // row starts and the start of the second half are 16-byte aligned too.
    if (cuda::can_vectorize<T>(shape.d, {px, po})) {
      const unsigned int blocks = cuda::one_pass_grid(shape.rows * (shape.d / kVec), kThreads);
      silu_and_mul_forward_kernel<T, kVec>
          <<<blocks, kThreads, 0, stream>>>(px, po, shape.rows, shape.d);
    } else {
      const unsigned int blocks = cuda::one_pass_grid(shape.rows * shape.d, kThreads);
      silu_and_mul_forward_kernel<T, 1>
          <<<blocks, kThreads, 0, stream>>>(px, po, shape.rows, shape.d);
    }
    WHEELOPS_CHECK_LAUNCH("silu_and_mul");
  });
  return out;
}

Tensor silu_and_mul_backward_cuda(const Tensor& grad, const Tensor& x) {
  check_backward_args(grad, x);
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor g_c = as_contiguous(grad);
  const Tensor x_c = as_contiguous(x);
  Tensor grad_x = allocate_like(x_c);
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
    if (cuda::can_vectorize<T>(shape.d, {pg, px, pgx})) {
      const unsigned int blocks = cuda::one_pass_grid(shape.rows * (shape.d / kVec), kThreads);
      silu_and_mul_backward_kernel<T, kVec>
          <<<blocks, kThreads, 0, stream>>>(pg, px, pgx, shape.rows, shape.d);
    } else {
      const unsigned int blocks = cuda::one_pass_grid(shape.rows * shape.d, kThreads);
      silu_and_mul_backward_kernel<T, 1>
          <<<blocks, kThreads, 0, stream>>>(pg, px, pgx, shape.rows, shape.d);
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
