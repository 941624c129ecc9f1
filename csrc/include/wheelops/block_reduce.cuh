// Warp- and block-wide reductions for the row kernels (norms, softmax).
//
// The combining order is a fixed butterfly, so the same inputs give bitwise
// the same result on every run: no atomics, no dependence on scheduling.
#pragma once

#include <cuda_runtime.h>

namespace wheelops::cuda {

constexpr int kWarpSize = 32;

struct SumOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return a + b;
  }
};

// NaN wins, as in torch.max: a row holding NaN reduces to NaN.
struct MaxOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return (a != a || a > b) ? a : b;
  }
};

// Every lane of the warp gets op over the warp's 32 values.
template <typename A, typename Op>
__device__ __forceinline__ A warp_allreduce(A value, Op op) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Every thread of the block gets op over the block's values. blockDim.x must be
// a multiple of 32 and at most 1024; `scratch` is __shared__ A[32]. Safe to call
// back to back with the same scratch (it synchronises before reusing it).
template <typename A, typename Op>
__device__ __forceinline__ A block_allreduce(A value, Op op, A identity, A* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  value = warp_allreduce(value, op);
  __syncthreads();  // a previous call may still be reading scratch
  if (lane == 0) {
    scratch[warp] = value;
  }
  __syncthreads();
  value = lane < warps ? scratch[lane] : identity;
  return warp_allreduce(value, op);
}

// Two sums in one pass over shared memory (e.g. mean and mean of squares, or
// the two dot products of a norm backward). `scratch` is __shared__ A[64].
template <typename A>
__device__ __forceinline__ void block_allreduce_sum2(A& first, A& second, A* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  first = warp_allreduce(first, SumOp{});
  second = warp_allreduce(second, SumOp{});
  __syncthreads();
  if (lane == 0) {
    scratch[warp] = first;
    scratch[kWarpSize + warp] = second;
  }
  __syncthreads();
  first = warp_allreduce(lane < warps ? scratch[lane] : A(0), SumOp{});
  second = warp_allreduce(lane < warps ? scratch[kWarpSize + lane] : A(0), SumOp{});
}

} // namespace wheelops::cuda
