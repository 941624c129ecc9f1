// Elementwise CUDA loops: 128-bit vectorized loads and stores when every
// pointer is 16-byte aligned, a scalar loop for the tail and for unaligned
// views (e.g. a slice starting at element 1). Indices are 32-bit up to 2**30
// elements and int64 beyond, so tensors over 2**31 elements are fine.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"

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

// Null pointers (absent optional tensors) do not count.
inline bool all_aligned_16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (p != nullptr && !is_aligned_16(p)) {
      return false;
    }
  }
  return true;
}

// 16-byte vectors fit when `n` (a row length) is a whole number of them and
// every pointer given is 16-byte aligned.
template <typename T>
bool can_vectorize(int64_t n, std::initializer_list<const void*> pointers) {
  return n % kVecSize<T> == 0 && all_aligned_16(pointers);
}

// The vec_index-th vector of N elements at p (p must allow it: can_vectorize).
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p, int64_t vec_index) {
  return reinterpret_cast<const Vec<T, N>*>(p)[vec_index];
}

template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, int64_t vec_index, const Vec<T, N>& v) {
  reinterpret_cast<Vec<T, N>*>(p)[vec_index] = v;
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

// The launch shape, measured on an H200 (benchmarks/results/h200-2026-11-30-issue43-add):
// 128-thread blocks of two vectors a thread, as torch's own elementwise kernels, with 32-bit
// indices. Against 256-thread blocks of four vectors a thread with 64-bit indices (float32 add
// 56 registers, bf16 95; the SMs held half or a third of torch's warps), add went from
// 0.84-1.00x torch.add to 0.95-1.00x (64K to 64M elements) and relu_scale ran 1.01-1.05x
// faster. 32-bit indices alone changed nothing measurable, and register bounds
// (__launch_bounds__ minimums that cap it at 32 or 40 registers) spilled and ran up to 4x
// slower.
constexpr int kElementwiseThreads = 128;
constexpr int kUnroll = 2;
// Up to here the indices of a one-pass grid, and the vector one tile past the last, fit in
// int32 with room to spare.
constexpr int64_t kMaxInt32Elements = int64_t{1} << 30;

// out[i] = op(in[0][i], ..., in[K-1][i]), computed in acc_type<T>. Blocks walk
// tiles of kElementwiseThreads * kUnroll vectors (one tile per block, a grid-stride
// loop beyond CUDA's grid limit); in a tile, thread t takes vectors t, t + kElementwiseThreads,
// ... so each load of a warp is contiguous. Index: int32_t up to kMaxInt32Elements, else int64_t.
template <typename Index, typename T, int kVec, int K, typename Op>
__global__ void __launch_bounds__(kElementwiseThreads)
    elementwise_kernel(T* __restrict__ out, Inputs<T, K> in, Index n, Op op) {
  using Seq = std::make_index_sequence<K>;
  constexpr Index kTile = Index{kElementwiseThreads} * kUnroll;
  const Index n_vec = n / kVec;
  for (Index base = Index(blockIdx.x) * kTile + Index(threadIdx.x); base < n_vec;
       base += kTile * Index(gridDim.x)) {
    Vec<T, kVec> x[kUnroll][K];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index v = base + Index{u} * kElementwiseThreads;
      if (v < n_vec) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          x[u][k] = reinterpret_cast<const Vec<T, kVec>*>(in.ptr[k])[v];
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Index v = base + Index{u} * kElementwiseThreads;
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
  // Tail: the last n % kVec elements (none when kVec == 1).
  const Index stride = Index{kElementwiseThreads} * Index(gridDim.x);
  for (Index i = n_vec * kVec + Index(blockIdx.x) * kElementwiseThreads + Index(threadIdx.x);
       i < n; i += stride) {
    Vec<T, 1> x[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      x[k].val[0] = in.ptr[k][i];
    }
    out[i] = apply_at<T, 1, K>(op, x, 0, Seq{});
  }
}

template <typename Index, typename T, int kVec, int K, typename Op>
void launch_elementwise_kernel(T* out, Inputs<T, K> in, int64_t n, Op op, cudaStream_t stream) {
  const unsigned int blocks =
      one_pass_grid((n / kVec + kUnroll - 1) / kUnroll, kElementwiseThreads);
  elementwise_kernel<Index, T, kVec, K, Op>
      <<<blocks, kElementwiseThreads, 0, stream>>>(out, in, static_cast<Index>(n), op);
}

template <typename T, int K, typename Op>
void launch_elementwise(
    T* out, Inputs<T, K> in, int64_t n, Op op, cudaStream_t stream, const char* op_name) {
  if (n == 0) {
    return;
  }
  bool aligned = is_aligned_16(out);
  for (int k = 0; k < K; ++k) {
    aligned = aligned && is_aligned_16(in.ptr[k]);
  }
  constexpr int kVec = kVecSize<T>;
  if (n <= kMaxInt32Elements) {
    if (aligned) {
      launch_elementwise_kernel<int32_t, T, kVec, K>(out, in, n, op, stream);
    } else {
      launch_elementwise_kernel<int32_t, T, 1, K>(out, in, n, op, stream);
    }
  } else if (aligned) {
    launch_elementwise_kernel<int64_t, T, kVec, K>(out, in, n, op, stream);
  } else {
    launch_elementwise_kernel<int64_t, T, 1, K>(out, in, n, op, stream);
  }
  WHEELOPS_CHECK_LAUNCH(op_name);
}

} // namespace wheelops::cuda
