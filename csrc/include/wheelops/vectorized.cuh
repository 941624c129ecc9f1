// Elementwise CUDA loops: 128-bit vectorized loads and stores when every
// pointer is 16-byte aligned, a scalar loop for the tail and for unaligned
// views (e.g. a slice starting at element 1). Indices are int64 throughout, so
// tensors over 2**31 elements are fine.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/occupancy.cuh"

namespace wheelops::cuda {

// Elements of T in one 16-byte access.
template <typename T>
constexpr int kVecSize = 16 / sizeof(T);

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T val[N];
};

inline bool is_aligned_16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <typename T, int K>
struct Inputs {
  const T* ptr[K];
};

template <typename T, int kVec, int K, typename Op, size_t... I>
__device__ __forceinline__ T apply_at(
    const Op& op, const Vec<T, kVec> (&x)[K], int j, std::index_sequence<I...>) {
  using A = acc_type<T>;
  return static_cast<T>(op(static_cast<A>(x[I].val[j])...));
}

// Vectors each thread loads before it stores: with one 16-byte load per input
// in flight per thread, a full SM (2048 threads) has too few bytes in flight
// to cover DRAM latency at small and mid sizes (add bf16 4096x8192 ran at 88%
// of copy bandwidth); four independent loads per input per thread do.
constexpr int kElementwiseUnroll = 4;
constexpr int kElementwiseThreads = 256;
// Resident blocks per SM the register budget must allow: 4 (1024 threads,
// 128 KB of loads for two 16-byte inputs), 3 for 16-bit types. Left alone,
// ptxas gave the bf16 add 95 registers (float copies of all eight vectors),
// i.e. 2 blocks per SM and no more bytes in flight than without the
// unrolling; bounded to 64 registers it spilled, to 80 it does not.
template <typename T>
constexpr int kElementwiseMinBlocks = sizeof(T) == 2 ? 3 : 4;

// out[i] = op(in[0][i], ..., in[K-1][i]), computed in acc_type<T>.
// A block covers kElementwiseUnroll * blockDim.x consecutive vectors per step;
// thread t takes vectors t, t + blockDim.x, ... of it, so every load and store
// instruction of a warp is still one contiguous, coalesced span.
template <typename T, int kVec, int K, typename Op>
__global__ void __launch_bounds__(kElementwiseThreads, kElementwiseMinBlocks<T>)
    elementwise_kernel(T* __restrict__ out, Inputs<T, K> in, int64_t n, Op op) {
  using Seq = std::make_index_sequence<K>;
  constexpr int kUnroll = kElementwiseUnroll;
  const int64_t tile = int64_t{blockDim.x} * kUnroll;
  const int64_t stride = tile * gridDim.x;
  const int64_t n_vec = n / kVec;
  for (int64_t base = int64_t{blockIdx.x} * tile + threadIdx.x; base < n_vec; base += stride) {
    Vec<T, kVec> x[kUnroll][K];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + int64_t{u} * blockDim.x;
      if (v < n_vec) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          x[u][k] = reinterpret_cast<const Vec<T, kVec>*>(in.ptr[k])[v];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + int64_t{u} * blockDim.x;
      if (v < n_vec) {
        Vec<T, kVec> r;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          r.val[j] = apply_at<T, kVec, K>(op, x[u], j, Seq{});
        }
        reinterpret_cast<Vec<T, kVec>*>(out)[v] = r;
      }
    }
  }
  // Tail (fewer than kVec elements; none when kVec == 1).
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t tail_stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = n_vec * kVec + first; i < n; i += tail_stride) {
    Vec<T, 1> x[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      x[k].val[0] = in.ptr[k][i];
    }
    out[i] = apply_at<T, 1, K>(op, x, 0, Seq{});
  }
}

template <typename T, int K, typename Op>
void launch_elementwise(
    T* out, Inputs<T, K> in, int64_t n, Op op, int32_t device, cudaStream_t stream,
    const char* op_name) {
  if (n == 0) {
    return;
  }
  bool aligned = is_aligned_16(out);
  for (int k = 0; k < K; ++k) {
    aligned = aligned && is_aligned_16(in.ptr[k]);
  }
  constexpr int kThreads = kElementwiseThreads;
  // One resident wave (grid-stride), sized from the kernel's occupancy: a
  // fixed "16 blocks per SM" grid ran as whole waves plus a partial one. Work
  // items are whole per-thread steps (kElementwiseUnroll vectors), so small
  // tensors launch no idle blocks; the +1 covers the scalar tail.
  if (aligned) {
    constexpr int kVec = kVecSize<T>;
    static OccupancyCache cache{};
    const auto kernel = elementwise_kernel<T, kVec, K, Op>;
    const int64_t steps = (n / kVec + kElementwiseUnroll - 1) / kElementwiseUnroll + 1;
    const unsigned int blocks =
        resident_grid(cache, kernel, kThreads, 0, (steps + kThreads - 1) / kThreads, device);
    kernel<<<blocks, kThreads, 0, stream>>>(out, in, n, op);
  } else {
    static OccupancyCache cache{};
    const auto kernel = elementwise_kernel<T, 1, K, Op>;
    const int64_t steps = (n + kElementwiseUnroll - 1) / kElementwiseUnroll;
    const unsigned int blocks =
        resident_grid(cache, kernel, kThreads, 0, (steps + kThreads - 1) / kThreads, device);
    kernel<<<blocks, kThreads, 0, stream>>>(out, in, n, op);
  }
  WHEELOPS_CHECK_LAUNCH(op_name);
}

} // namespace wheelops::cuda
