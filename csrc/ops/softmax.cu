// softmax forward and backward along the last dimension: CUDA kernels.
//
// Softmax is memory-bound, so the goal is the least traffic: read x once, write
// y once (the backward: read g and y once, write grad_x once). A row therefore
// stays in registers between its reductions: a team of threads (a slice of a
// warp for short rows, a whole block for long ones) loads it with 16-byte
// vectors, reduces it to its max and its sum of exponentials (the backward: to
// one dot product) and writes it from the same registers. The host sizes the
// team from the row length so that each thread holds a few vectors: enough
// loads in flight to cover memory latency, few enough registers for full
// occupancy. Rows too long for the registers of one block take two passes (an
// online pass with a running max and a rescaled sum, then a writing pass):
// correct for any length at 1.5x the traffic. Reductions run in a fixed order,
// so results are bitwise the same on every run.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <math_constants.h>

#include <algorithm>
#include <initializer_list>
#include <type_traits>

#include "softmax.h"
#include "wheelops/block_reduce.cuh"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/math.h"
#include "wheelops/occupancy.cuh"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops::softmax {
namespace {

using cuda::kWarpSize;
using cuda::MaxOp;
using cuda::SumOp;
using cuda::Vec;

constexpr unsigned int kFullMask = 0xffffffffu;
// Threads of the largest team. Half a block's maximum leaves every thread up
// to 128 registers, so a long row fits without spilling, while two blocks of
// short-enough rows still share an SM.
constexpr int kMaxThreads = 512;
// Block size when a row's team is at most one warp: several rows per block.
constexpr int kSmallRowBlock = 128;
// Vectors per thread the host aims for. Forward: two for 16-bit rows, so an
// 8192-column row takes a team of 512 threads holding 16 floats each, in 32
// registers at full occupancy (Liger's Triton softmax's shape; H200, bf16, one
// call, against four vectors a thread before: 8192 x 8192 77.3 us against 85.9,
// 4096 x 8192 41.9 against 46.5, 4096 x 4096 23.0 against 25.2); four for float
// rows. Backward: two per array, which loads two arrays (at four, 4096-8192
// column rows ran 5-8% slower, H200).
template <typename T>
constexpr int kForwardItems = sizeof(T) == 2 ? 2 : 4;
constexpr int kBackwardItems = 2;
// Register bytes per thread for the row (64 floats; the backward holds g and
// y in their own dtype): the most that fits the 128-register cap beside the
// addresses and loop state. Beyond that (32768 float/bfloat16 elements per
// row forward) rows take two passes.
constexpr int kRowRegisterBytes = 256;
// dispatch_items instantiates up to this many vectors per thread.
constexpr int kMaxItemsDispatched = 32;
// Vectors each thread loads per step of the two-pass kernels.
constexpr int kStreamBatch = 4;
constexpr int kMaxSmsWaves = 8;

using math::exp_;

// Blocks of kMaxThreads the compiler must fit on an SM at once, for
// __launch_bounds__. A 16-bit vector row of up to 64 bytes a thread (16 floats)
// needs no more than 32 registers, so four blocks (a full SM) must fit: Liger's
// Triton softmax runs 8192-column bf16 rows so (32 registers, 100% theoretical
// occupancy), where ptxas, left free, gave ours 40-56 registers and 50-75%
// occupancy (ncu, H200). Every other kernel gets 0: no minimum at all, which is
// not the same as 1 (a minimum of 1 let ptxas take 55 registers for the float
// rows of 8192 columns where it took 40, and ran them 13% slower).
template <typename T, int kVec>
constexpr int min_resident_blocks(size_t row_bytes_per_thread) {
  return sizeof(T) == 2 && kVec > 1 && row_bytes_per_thread <= 64 ? 2048 / kMaxThreads : 0;
}

// exp(v - max) for the register kernels. A 16-bit row has twice the elements
// per byte of a float row, so its instruction count per byte matters (the
// bf16 kernels ran at ~60% of copy bandwidth): for 16-bit types, exp2 of a
// pre-scaled argument (one FFMA + MUFU.EX2 instead of expf's range reduction)
// is accurate far beyond the output's 8-11 bits. float and double keep the
// full-precision exp. `scaled_max` is max * log2(e) for 16-bit types, max
// otherwise (see scale_max).
template <typename T, typename A>
__device__ __forceinline__ A scale_max(A row_max) {
  if constexpr (sizeof(T) == 2) {
    return row_max * A(CUDART_L2E_F);
  } else {
    return row_max;
  }
}

template <typename T, typename A>
__device__ __forceinline__ A exp_shifted(A v, A scaled_max) {
  if constexpr (sizeof(T) == 2) {
    // inf/NaN behave as in exp(v - max): fma(inf, c, -inf) is NaN, fma(x, c,
    // -inf) with finite x is -inf (exp2 -> 0), and NaN stays NaN.
    return exp2f(fmaf(v, CUDART_L2E_F, -scaled_max));
  } else {
    return exp_(v - scaled_max);
  }
}

// Keeps the compiler from carrying float copies of a 16-bit vector across a
// reduction: without it, ptxas kept both the packed inputs and their float
// conversions live (95 registers for the bf16 backward at 4 vectors per thread,
// so only 2 blocks of 256 threads per SM). Re-converting after the barrier
// costs one instruction per element and halves the registers the row needs.
template <typename T, int kVec>
__device__ __forceinline__ void opaque(Vec<T, kVec>& v) {
  if constexpr (sizeof(T) == 2 && sizeof(Vec<T, kVec>) % 4 == 0) {
    auto* words = reinterpret_cast<unsigned int*>(&v);
#pragma unroll
    for (int w = 0; w < static_cast<int>(sizeof(Vec<T, kVec>) / 4); ++w) {
      asm volatile("" : "+r"(words[w]));
    }
  }
}

template <typename A>
__device__ __forceinline__ A negative_infinity() {
  if constexpr (sizeof(A) == sizeof(double)) {
    return -CUDART_INF;
  } else {
    return -CUDART_INF_F;
  }
}

// The threads sharing one row: `size` consecutive threads of the block, either
// a power of two up to a warp (several teams per block) or the whole block.
struct Team {
  int size;
  int lane;       // index within the team
  int index;      // which team of the block
  int per_block;  // teams in the block
};

// kWholeRow: the team is the block, known at compile time (no division by the team size).
template <bool kWholeRow = false>
__device__ __forceinline__ Team make_team(int size) {
  if constexpr (kWholeRow) {
    return {static_cast<int>(blockDim.x), static_cast<int>(threadIdx.x), 0, 1};
  }
  const int s = size <= kWarpSize ? size : static_cast<int>(blockDim.x);
  const int t = static_cast<int>(threadIdx.x);
  return {s, t % s, t / s, static_cast<int>(blockDim.x) / s};
}

// op over the team's values, in every thread of the team, in a fixed order.
// Teams within a warp use xor offsets below their size, so they never mix.
// kBlockTeam: the caller knows the team is the block (no run-time test).
template <bool kBlockTeam = false, typename A, typename Op>
__device__ __forceinline__ A team_allreduce(A value, Op op, A identity, const Team& team, A* scratch) {
  if (kBlockTeam || team.size > kWarpSize) {
    return cuda::block_allreduce(value, op, identity, scratch);
  }
  for (int offset = team.size / 2; offset > 0; offset /= 2) {
    value = op(value, __shfl_xor_sync(kFullMask, value, offset));
  }
  return value;
}

// Asks L2 to fetch the block's next rows, [p, p + bytes), while the current
// ones are reduced. The register kernels can hold only a few rows per SM
// (their registers are the row buffer), which is not enough bytes in flight to
// cover DRAM latency, and a block loads nothing while it reduces and writes;
// with the next rows already streaming into L2 the SM keeps DRAM busy through
// those phases and its own loads see L2 latency. A hint only (sm_90 bulk
// prefetch): results never depend on it. p and bytes must be multiples of 16,
// which the 16-byte vector path guarantees.
__device__ __forceinline__ void prefetch_l2(const void* p, int64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x < kWarpSize && bytes > 0) {
    const int64_t chunk = (bytes + kWarpSize * 16 - 1) / (kWarpSize * 16) * 16;
    const int64_t begin = int64_t{threadIdx.x} * chunk;
    if (begin < bytes) {
      const int64_t len = bytes - begin < chunk ? bytes - begin : chunk;
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;"
                   :
                   : "l"(static_cast<const char*>(p) + begin), "r"(static_cast<unsigned int>(len))
                   : "memory");
    }
  }
#endif
}

// Prefetches the rows [next_first, next_first + count) of a [rows, cols] array
// (the rows a block handles on its next grid-stride step), vector path only.
template <typename T, int kVec>
__device__ __forceinline__ void prefetch_rows(
    const T* base, int64_t next_first, int64_t per_block, int64_t rows, int64_t cols) {
  if constexpr (kVec > 1) {
    if (next_first < rows) {
      const int64_t count = rows - next_first < per_block ? rows - next_first : per_block;
      prefetch_l2(base + next_first * cols, count * cols * static_cast<int64_t>(sizeof(T)));
    }
  }
}

// ---------------------------------------------------------------- forward --

// Each team owns one row at a time; thread `lane` holds vectors lane,
// lane + size, ... (kItems of them). The loop over rows is uniform across the
// block (teams past the last row idle through it) so every shuffle and
// barrier sees all its threads.
//
// kWholeRow: the block is the team and every thread holds exactly kItems vectors (columns =
// block size x kItems x kVec: rows of 1024, 2048, 4096 or 8192 columns, 16384 in 16 bits;
// 512-4096 for double), a block per row. Then the
// kernel needs no team arithmetic (a division by the run-time team size), no per-item
// bounds checks, no L2 prefetch (a block per row: no next row) and no branch between warp
// and block reductions: ncu put the general kernel at 1.34x Liger's issued instructions on
// bf16 8192 x 8192, 19 branch instructions a warp a row against 1, and twice the integer
// ones. Same loads, reductions and rounding: the results are bitwise the same. H200, one
// call: bf16 8192 x 8192 77.5 -> 70.1 us (Liger 69.7-70.2), 4096 x 8192 42.1 -> 38.3
// (37.8), 4096 x 4096 23.1 -> 21.8 (22.4); float within 1% (benchmarks/results/
// h200-2026-11-30-issue44-gelu16). 16-bit rows of 16384 columns (four vectors a thread, as
// float: 63 registers, two 512-thread blocks an SM) ran 1.13-1.23x faster than on the packed
// kernel's one wave (40 registers, four blocks): bf16 4096 x 16384 87.9 -> 73.0 us (Liger
// 73.8), 8192 x 16384 169.6 -> 137.5 (139.7), 2048 x 16384 47.2 -> 40.1 (40.5); the packed
// form as a whole-row kernel took 64 registers and ran between the two (benchmarks/results/
// h200-2026-12-01-issue45-softmax16k).
//
// kPacked (16-bit rows of more than two vectors a thread, but those of 16384 columns; see
// launch_forward): the row stays packed in its own dtype and each exp is evaluated twice
// (for the sum, then for the output) rather than kept in float. The float row took 32 of
// the thread's 56 registers, so 4 blocks of 256 threads fitted an SM and too few bytes were
// in flight (ncu, H200, bf16 8192 x 8192: 47% occupancy, 54% of DRAM bandwidth; packed: 40
// registers). The second exp is the same FFMA + MUFU.EX2 on the same operands: the output
// is bitwise the same either way.
template <typename T, int kVec, int kItems, bool kPacked, bool kWholeRow = false>
__global__ void __launch_bounds__(
    kMaxThreads, min_resident_blocks<T, kVec>(kItems * kVec * sizeof(acc_type<T>)))
softmax_forward_in_registers(
    const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols, int team_size) {
  using A = acc_type<T>;
  static_assert(!kPacked || sizeof(T) == 2, "only 16-bit rows stay packed");
  static_assert(!(kPacked && kWholeRow), "whole-row blocks take unpacked rows");
  __shared__ A scratch[kWarpSize];
  const Team team = make_team<kWholeRow>(team_size);
  const int vecs = static_cast<int>(cols / kVec);  // at most kMaxThreads * kItems
  const int64_t stride = int64_t{gridDim.x} * team.per_block;
  for (int64_t first = int64_t{blockIdx.x} * team.per_block; first < rows; first += stride) {
    const int64_t row = first + team.index;
    const bool active = kWholeRow || row < rows;
    const T* in = x + (active ? row : 0) * cols;
    T* out_row = y + (active ? row : 0) * cols;
    // The row: packed (16-bit) or as float values (float, double); one is used.
    Vec<T, kVec> packed[kPacked ? kItems : 1];
    A v[kPacked ? 1 : kItems][kVec];
    A local_max = negative_infinity<A>();
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int vi = team.lane + i * team.size;
      if (kWholeRow || (active && vi < vecs)) {
        const Vec<T, kVec> p = cuda::load_vec<T, kVec>(in, vi);
        if constexpr (kPacked) {
          packed[i] = p;
        }
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const A value = static_cast<A>(p.val[j]);
          if constexpr (!kPacked) {
            v[i][j] = value;
          }
          // fmax drops NaN (one instruction instead of MaxOp's three); a NaN
          // still poisons the row through its exp in the sum below, as in torch.
          local_max = fmax(local_max, value);
        }
      }
    }
    if constexpr (!kWholeRow) {
      prefetch_rows<T, kVec>(x, first + stride, team.per_block, rows, cols);
    }
    if constexpr (kPacked) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        opaque(packed[i]);
      }
    }
    const A row_max =
        team_allreduce<kWholeRow>(local_max, MaxOp{}, negative_infinity<A>(), team, scratch);
    const A scaled_max = scale_max<T>(row_max);
    A local_sum = A(0);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int vi = team.lane + i * team.size;
      if (kWholeRow || (active && vi < vecs)) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          if constexpr (kPacked) {
            local_sum += exp_shifted<T>(static_cast<A>(packed[i].val[j]), scaled_max);
          } else {
            v[i][j] = exp_shifted<T>(v[i][j], scaled_max);
            local_sum += v[i][j];
          }
        }
      }
    }
    if constexpr (kPacked) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        opaque(packed[i]);
      }
    }
    const A row_sum = team_allreduce<kWholeRow>(local_sum, SumOp{}, A(0), team, scratch);
    const A inv = A(1) / row_sum;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int vi = team.lane + i * team.size;
      if (kWholeRow || (active && vi < vecs)) {
        Vec<T, kVec> out;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          A e;
          if constexpr (kPacked) {
            e = exp_shifted<T>(static_cast<A>(packed[i].val[j]), scaled_max);
          } else {
            e = v[i][j];
          }
          out.val[j] = static_cast<T>(e * inv);
        }
        cuda::store_vec<T, kVec>(out_row, vi, out);
      }
    }
  }
}

// s, a sum of exp(x - from), re-expressed as a sum of exp(x - to) (to >= from).
// Equal maxima need no factor; that also keeps -inf - -inf (no finite value
// yet) and inf - inf from turning a valid partial sum into NaN.
template <typename A>
__device__ __forceinline__ A rescale(A s, A from, A to) {
  return from == to ? s : s * exp_(from - to);
}

// Running (max, sum of exp(x - max)) of a row, merged with another one.
template <typename A>
struct OnlineSum {
  A max;
  A sum;

  __device__ __forceinline__ void merge(A other_max, A other_sum) {
    const A m = MaxOp{}(max, other_max);
    sum = rescale(sum, max, m) + rescale(other_sum, other_max, m);
    max = m;
  }
};

// Merging is commutative bit for bit (max, and one addition), so the
// butterfly leaves every thread with the same result.
template <typename A>
__device__ __forceinline__ OnlineSum<A> block_allreduce_online(OnlineSum<A> v, A* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v.merge(__shfl_xor_sync(kFullMask, v.max, offset), __shfl_xor_sync(kFullMask, v.sum, offset));
  }
  __syncthreads();  // the previous row may still be reading scratch
  if (lane == 0) {
    scratch[warp] = v.max;
    scratch[kWarpSize + warp] = v.sum;
  }
  __syncthreads();
  v = lane < warps ? OnlineSum<A>{scratch[lane], scratch[kWarpSize + lane]}
                   : OnlineSum<A>{negative_infinity<A>(), A(0)};
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v.merge(__shfl_xor_sync(kFullMask, v.max, offset), __shfl_xor_sync(kFullMask, v.sum, offset));
  }
  return v;
}

// Rows longer than a block's registers: one block per row, two passes.
template <typename T, int kVec>
__global__ void __launch_bounds__(kMaxThreads) softmax_forward_two_pass(
    const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols) {
  using A = acc_type<T>;
  __shared__ A scratch[2 * kWarpSize];
  const int64_t vecs = cols / kVec;
  const int64_t step = int64_t{blockDim.x} * kStreamBatch;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * cols;
    OnlineSum<A> acc{negative_infinity<A>(), A(0)};
    for (int64_t base = threadIdx.x; base < vecs; base += step) {
      Vec<T, kVec> p[kStreamBatch];
#pragma unroll
      for (int b = 0; b < kStreamBatch; ++b) {
        const int64_t vi = base + int64_t{b} * blockDim.x;
        if (vi < vecs) {
          p[b] = cuda::load_vec<T, kVec>(in, vi);
        }
      }
#pragma unroll
      for (int b = 0; b < kStreamBatch; ++b) {
        if (base + int64_t{b} * blockDim.x < vecs) {
          A chunk_max = static_cast<A>(p[b].val[0]);
#pragma unroll
          for (int j = 1; j < kVec; ++j) {
            chunk_max = MaxOp{}(chunk_max, static_cast<A>(p[b].val[j]));
          }
          // A chunk of only -inf adds nothing (and exp(-inf - -inf) would be NaN).
          A chunk_sum = A(0);
          if (chunk_max != negative_infinity<A>()) {
#pragma unroll
            for (int j = 0; j < kVec; ++j) {
              chunk_sum += exp_(static_cast<A>(p[b].val[j]) - chunk_max);
            }
          }
          acc.merge(chunk_max, chunk_sum);
        }
      }
    }
    const OnlineSum<A> total = block_allreduce_online(acc, scratch);
    const A inv = A(1) / total.sum;
    T* out = y + row * cols;
    for (int64_t base = threadIdx.x; base < vecs; base += step) {
      Vec<T, kVec> p[kStreamBatch];
#pragma unroll
      for (int b = 0; b < kStreamBatch; ++b) {
        const int64_t vi = base + int64_t{b} * blockDim.x;
        if (vi < vecs) {
          p[b] = cuda::load_vec<T, kVec>(in, vi);
        }
      }
#pragma unroll
      for (int b = 0; b < kStreamBatch; ++b) {
        const int64_t vi = base + int64_t{b} * blockDim.x;
        if (vi < vecs) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            p[b].val[j] = static_cast<T>(exp_(static_cast<A>(p[b].val[j]) - total.max) * inv);
          }
          cuda::store_vec<T, kVec>(out, vi, p[b]);
        }
      }
    }
  }
}

// --------------------------------------------------------------- backward --

// grad_x = y * (g - sum(g * y)), the row of g and y held in registers.
//
// kWholeRow, as the forward's: 16-bit rows that fill the block exactly at two or four vectors
// of each array a thread (1024-8192 and 16384 columns), with no guards and no L2 prefetch
// (which never fires: the backward has a block per row), and no minimum of resident blocks.
// Same loads and sums, bitwise the same results; H200 (benchmarks/results/
// h200-2026-12-01-issue45-softmax16k):
// - four vectors (16384 columns): 80-82 registers, one 512-thread block an SM, against the
//   general kernel's 56: 1.15-1.21x faster (bf16 4096 x 16384 126.3 -> 104.4 us, Liger
//   98.7; 8192 x 16384 232.5 -> 199.4, Liger 190.4);
// - two vectors: 46-47 registers, where the general kernel's four-block minimum (32
//   registers) spilled 8 bytes and the same minimum on the whole-row kernel 48: 1.02-1.09x
//   faster (bf16 4096 x 4096 31.3 -> 29.9, 4096 x 1024 12.3 -> 11.2, 8192 x 8192 100.6 ->
//   98.4). With a minimum of three blocks (40 registers) it spilled 8 bytes and gained half
//   as much; dropping only the prefetch from the general kernel changed no row by over 2%.
template <typename T, int kVec, int kItems, bool kWholeRow = false>
__global__ void __launch_bounds__(
    kMaxThreads, kWholeRow ? 0 : min_resident_blocks<T, kVec>(2 * kItems * kVec * sizeof(T)))
softmax_backward_in_registers(
    const T* __restrict__ grad, const T* __restrict__ y, T* __restrict__ grad_x, int64_t rows,
    int64_t cols, int team_size) {
  using A = acc_type<T>;
  __shared__ A scratch[kWarpSize];
  const Team team = make_team<kWholeRow>(team_size);
  const int vecs = static_cast<int>(cols / kVec);  // at most kMaxThreads * kItems
  const int64_t stride = int64_t{gridDim.x} * team.per_block;
  for (int64_t first = int64_t{blockIdx.x} * team.per_block; first < rows; first += stride) {
    const int64_t row = first + team.index;
    const bool active = kWholeRow || row < rows;
    const int64_t offset = (active ? row : 0) * cols;
    const T* g_row = grad + offset;
    const T* y_row = y + offset;
    T* out_row = grad_x + offset;
    Vec<T, kVec> g[kItems];
    Vec<T, kVec> o[kItems];
    A local_dot = A(0);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int vi = team.lane + i * team.size;
      if (kWholeRow || (active && vi < vecs)) {
        g[i] = cuda::load_vec<T, kVec>(g_row, vi);
        o[i] = cuda::load_vec<T, kVec>(y_row, vi);
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          local_dot += static_cast<A>(g[i].val[j]) * static_cast<A>(o[i].val[j]);
        }
      }
    }
    if constexpr (!kWholeRow) {
      prefetch_rows<T, kVec>(grad, first + stride, team.per_block, rows, cols);
      prefetch_rows<T, kVec>(y, first + stride, team.per_block, rows, cols);
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      opaque(g[i]);
      opaque(o[i]);
    }
    const A dot = team_allreduce<kWholeRow>(local_dot, SumOp{}, A(0), team, scratch);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int vi = team.lane + i * team.size;
      if (kWholeRow || (active && vi < vecs)) {
        Vec<T, kVec> out;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const A yj = static_cast<A>(o[i].val[j]);
          out.val[j] = static_cast<T>(yj * (static_cast<A>(g[i].val[j]) - dot));
        }
        cuda::store_vec<T, kVec>(out_row, vi, out);
      }
    }
  }
}

// Rows longer than a block's registers: the dot product, then a writing pass.
template <typename T, int kVec>
__global__ void __launch_bounds__(kMaxThreads) softmax_backward_two_pass(
    const T* __restrict__ grad, const T* __restrict__ y, T* __restrict__ grad_x, int64_t rows,
    int64_t cols) {
  using A = acc_type<T>;
  __shared__ A scratch[kWarpSize];
  const int64_t vecs = cols / kVec;
  const int64_t step = int64_t{blockDim.x} * kStreamBatch;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* g_row = grad + row * cols;
    const T* y_row = y + row * cols;
    A local_dot = A(0);
    for (int64_t base = threadIdx.x; base < vecs; base += step) {
      Vec<T, kVec> g[kStreamBatch];
      Vec<T, kVec> o[kStreamBatch];
#pragma unroll
      for (int b = 0; b < kStreamBatch; ++b) {
        const int64_t vi = base + int64_t{b} * blockDim.x;
        if (vi < vecs) {
          g[b] = cuda::load_vec<T, kVec>(g_row, vi);
          o[b] = cuda::load_vec<T, kVec>(y_row, vi);
        }
      }
#pragma unroll
      for (int b = 0; b < kStreamBatch; ++b) {
        if (base + int64_t{b} * blockDim.x < vecs) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            local_dot += static_cast<A>(g[b].val[j]) * static_cast<A>(o[b].val[j]);
          }
        }
      }
    }
    const A dot = cuda::block_allreduce(local_dot, SumOp{}, A(0), scratch);
    T* out = grad_x + row * cols;
    for (int64_t base = threadIdx.x; base < vecs; base += step) {
      Vec<T, kVec> g[kStreamBatch];
      Vec<T, kVec> o[kStreamBatch];
#pragma unroll
      for (int b = 0; b < kStreamBatch; ++b) {
        const int64_t vi = base + int64_t{b} * blockDim.x;
        if (vi < vecs) {
          g[b] = cuda::load_vec<T, kVec>(g_row, vi);
          o[b] = cuda::load_vec<T, kVec>(y_row, vi);
        }
      }
#pragma unroll
      for (int b = 0; b < kStreamBatch; ++b) {
        const int64_t vi = base + int64_t{b} * blockDim.x;
        if (vi < vecs) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const A yj = static_cast<A>(o[b].val[j]);
            g[b].val[j] = static_cast<T>(yj * (static_cast<A>(g[b].val[j]) - dot));
          }
          cuda::store_vec<T, kVec>(out, vi, g[b]);
        }
      }
    }
  }
}

// ------------------------------------------------------------------ host --

// How a row is spread over threads: `team` threads hold `items` vectors each,
// or (two_pass) a block streams it twice.
struct RowPlan {
  int team;
  int items;
  bool two_pass;

  // Whether a row of `vecs` vectors fills the block exactly (the whole-row kernels): the team
  // is the block and every thread holds `items` vectors.
  bool fills_block(int64_t vecs) const { return team > kWarpSize && vecs == int64_t{team} * items; }
};

RowPlan plan_rows(int64_t vecs, int target_items, int max_items) {
  const int64_t wanted_team = (vecs + target_items - 1) / target_items;
  int team = 1;
  while (team < wanted_team && team < kMaxThreads) {
    team *= 2;
  }
  const int64_t needed = (vecs + team - 1) / team;
  int items = 1;
  while (items < needed && items <= max_items) {
    items *= 2;
  }
  return {team, items, items > max_items};
}

// Blocks for a grid-stride loop over `groups` (rows, or blocks of rows).
unsigned int blocks_for(int64_t groups, int threads, int32_t device) {
  const int64_t per_sm = (2048 + threads - 1) / threads;
  const int64_t cap = int64_t{cuda::multiprocessor_count(device)} * per_sm * kMaxSmsWaves;
  const int64_t blocks = groups < cap ? groups : cap;
  return static_cast<unsigned int>(blocks > 0 ? blocks : 1);
}

template <typename T>
int vector_width(int64_t cols, std::initializer_list<const void*> pointers) {
  return cuda::can_vectorize<T>(cols, pointers) ? cuda::kVecSize<T> : 1;
}

// Calls fn(std::integral_constant<int, kItems>{}) for items in 1, 2, 4, ..., 32,
// instantiating only what fits kMaxItems.
template <int kMaxItems, typename Fn>
void dispatch_items(int items, Fn&& fn) {
  if constexpr (kMaxItems >= 1) {
    if (items == 1) return fn(std::integral_constant<int, 1>{});
  }
  if constexpr (kMaxItems >= 2) {
    if (items == 2) return fn(std::integral_constant<int, 2>{});
  }
  if constexpr (kMaxItems >= 4) {
    if (items == 4) return fn(std::integral_constant<int, 4>{});
  }
  if constexpr (kMaxItems >= 8) {
    if (items == 8) return fn(std::integral_constant<int, 8>{});
  }
  if constexpr (kMaxItems >= 16) {
    if (items == 16) return fn(std::integral_constant<int, 16>{});
  }
  if constexpr (kMaxItems >= 32) {
    if (items == 32) return fn(std::integral_constant<int, 32>{});
  }
  WHEELOPS_CHECK(false, "wheelops.softmax: internal error: no kernel for ", items, " items");
}

struct Launch {
  unsigned int blocks;
  int threads;
};

// `one_wave`: one resident wave of `kernel` (a grid-stride loop over blocks of
// rows), so each block has a next row to prefetch while it works on the current
// one; else a block per row group. The one wave serves the packed 16-bit forward of
// rows longer than a 512-thread team's two vectors a thread (measured at bf16 4096 x
// 16384 before those rows took the whole-row kernel, H200: 88.3 us against 96.6 on all
// rows' blocks); shorter 16-bit rows, the
// float forward and every backward ran faster on all rows' blocks (H200, bf16
// 8192 x 8192: 77.6 us against 81.7; H100: float forward 4096 x 16384 184 us
// against 221, 8192 x 8192 183 against 209; float backward 269 against 307).
template <auto kKernel>
Launch register_launch(const RowPlan& plan, int64_t rows, bool one_wave, int32_t device) {
  const int threads = plan.team <= kWarpSize ? kSmallRowBlock : plan.team;
  const int64_t per_block = plan.team <= kWarpSize ? kSmallRowBlock / plan.team : 1;
  const int64_t groups = (rows + per_block - 1) / per_block;
  if (!one_wave) {
    return {cuda::one_pass_grid(groups, 1), threads};
  }
  return {cuda::resident_grid<kKernel>(threads, 0, groups, device), threads};
}

// A forward kernel that holds its rows in registers, on register_launch's grid.
template <auto kKernel, typename T>
void launch_in_registers(
    const T* x, T* y, const RowPlan& plan, RowsCols shape, bool one_wave, int32_t device,
    cudaStream_t stream) {
  const Launch launch = register_launch<kKernel>(plan, shape.rows, one_wave, device);
  kKernel<<<launch.blocks, launch.threads, 0, stream>>>(x, y, shape.rows, shape.cols, plan.team);
}

template <typename T, int kVec>
void launch_forward(const T* x, T* y, RowsCols shape, int32_t device, cudaStream_t stream) {
  using A = acc_type<T>;
  constexpr int kMaxItems =
      std::min(kRowRegisterBytes / (kVec * static_cast<int>(sizeof(A))), kMaxItemsDispatched);
  const RowPlan plan = plan_rows(shape.cols / kVec, kForwardItems<T>, kMaxItems);
  if (plan.two_pass) {
    const unsigned int blocks = blocks_for(shape.rows, kMaxThreads, device);
    softmax_forward_two_pass<T, kVec>
        <<<blocks, kMaxThreads, 0, stream>>>(x, y, shape.rows, shape.cols);
  } else {
    // Other 16-bit rows longer than a 512-thread team's two vectors a thread (over 8192
    // columns, but 16384: the whole-row kernel's) stay packed, on one resident wave. Measured
    // at bf16 4096 x 16384 before those rows took the whole-row kernel (H200): 86.4 us
    // against 91.6 unpacked (as float values) on the general kernel at 64 registers.
    const bool packed = sizeof(T) == 2 && plan.items > kForwardItems<T>;
    const bool whole_row = plan.fills_block(shape.cols / kVec);
    dispatch_items<kMaxItems>(plan.items, [&](auto items) {
      constexpr int kItems = decltype(items)::value;
      constexpr bool kWholeRowItems =
          kItems == kForwardItems<T> ||
          (sizeof(T) == 2 && kVec > 1 && kItems == 2 * kForwardItems<T>);
      if constexpr (kWholeRowItems) {
        if (whole_row) {
          return launch_in_registers<softmax_forward_in_registers<T, kVec, kItems, false, true>>(
              x, y, plan, shape, false, device, stream);
        }
      }
      if constexpr (sizeof(T) == 2 && kVec > 1 && kItems > kForwardItems<T>) {
        if (packed) {
          return launch_in_registers<softmax_forward_in_registers<T, kVec, kItems, true>>(
              x, y, plan, shape, packed, device, stream);
        }
      }
      launch_in_registers<softmax_forward_in_registers<T, kVec, kItems, false>>(
          x, y, plan, shape, packed, device, stream);
    });
  }
  WHEELOPS_CHECK_LAUNCH("softmax");
}

template <typename T, int kVec>
void launch_backward(
    const T* grad, const T* y, T* grad_x, RowsCols shape, int32_t device, cudaStream_t stream) {
  constexpr int kMaxItems =
      std::min(kRowRegisterBytes / (2 * kVec * static_cast<int>(sizeof(T))), kMaxItemsDispatched);
  const RowPlan plan = plan_rows(shape.cols / kVec, kBackwardItems, kMaxItems);
  if (plan.two_pass) {
    const unsigned int blocks = blocks_for(shape.rows, kMaxThreads, device);
    softmax_backward_two_pass<T, kVec>
        <<<blocks, kMaxThreads, 0, stream>>>(grad, y, grad_x, shape.rows, shape.cols);
  } else {
    const bool whole_row = plan.fills_block(shape.cols / kVec);
    dispatch_items<kMaxItems>(plan.items, [&](auto items) {
      constexpr int kItems = decltype(items)::value;
      auto launch_with = [&](auto whole) {
        constexpr auto kernel =
            softmax_backward_in_registers<T, kVec, kItems, decltype(whole)::value>;
        const Launch launch = register_launch<kernel>(plan, shape.rows, false, device);
        kernel<<<launch.blocks, launch.threads, 0, stream>>>(
            grad, y, grad_x, shape.rows, shape.cols, plan.team);
      };
      if constexpr (sizeof(T) == 2 && kVec > 1 && (kItems == 2 || kItems == 4)) {
        if (whole_row) {
          return launch_with(std::true_type{});
        }
      }
      launch_with(std::false_type{});
    });
  }
  WHEELOPS_CHECK_LAUNCH("softmax_backward");
}

Tensor softmax_cuda(const Tensor& x, int64_t dim) {
  const int64_t d = check_forward_args(x, dim);
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor x_rows = move_dim_last(x, d);
  Tensor out = allocate_like(x_rows);
  if (x_rows.numel() > 0) {
    const RowsCols shape = rows_cols(x_rows);
    const cudaStream_t stream = cuda::current_stream(device, "softmax");
    dispatch_float(x_rows.scalar_type(), "softmax", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x_rows.const_data_ptr<T>();
      T* py = out.mutable_data_ptr<T>();
      if (vector_width<T>(shape.cols, {px, py}) > 1) {
        launch_forward<T, cuda::kVecSize<T>>(px, py, shape, device, stream);
      } else {
        launch_forward<T, 1>(px, py, shape, device, stream);
      }
    });
  }
  return move_dim_back(out, d);
}

Tensor softmax_backward_cuda(const Tensor& grad, const Tensor& out, int64_t dim) {
  const int64_t d = check_backward_args(grad, out, dim);
  const int32_t device = out.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor g_rows = move_dim_last(grad, d);
  const Tensor y_rows = move_dim_last(out, d);
  Tensor grad_x = allocate_like(y_rows);
  if (y_rows.numel() > 0) {
    const RowsCols shape = rows_cols(y_rows);
    const cudaStream_t stream = cuda::current_stream(device, "softmax_backward");
    dispatch_float(y_rows.scalar_type(), "softmax_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* pg = g_rows.const_data_ptr<T>();
      const T* py = y_rows.const_data_ptr<T>();
      T* pgx = grad_x.mutable_data_ptr<T>();
      if (vector_width<T>(shape.cols, {pg, py, pgx}) > 1) {
        launch_backward<T, cuda::kVecSize<T>>(pg, py, pgx, shape, device, stream);
      } else {
        launch_backward<T, 1>(pg, py, pgx, shape, device, stream);
      }
    });
  }
  return move_dim_back(grad_x, d);
}

} // namespace

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("softmax", TORCH_BOX(&softmax_cuda));
  m.impl("softmax_backward", TORCH_BOX(&softmax_backward_cuda));
}

} // namespace wheelops::softmax
