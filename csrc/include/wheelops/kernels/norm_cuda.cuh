// CUDA kernels of layer_norm (kCentered) and rms_norm (!kCentered).
//
// Why this shape: a norm is memory-bound, so the only goal is to move each byte
// once. Forward reads x once and writes out once (plus 4-8 bytes of stats per
// row); backward reads x and grad once and writes grad_x once.
//
// * Rows that fit are held in registers: each thread loads kN 16-byte vectors
//   of its row (columns tx, tx + TX, ... in vector units, so a warp's loads are
//   contiguous) and keeps them as raw T (half the registers of float for
//   16-bit types). The mean (shifted by the row's first value) and then the
//   centred variance, corrected by the centred sum, are computed from registers:
//   two passes, no sum-of-squares cancellation, one read.
// * A row is handled by TX threads (a warp, or a whole block for long rows;
//   TX and kN are picked from the row length on the host: the most vectors per
//   thread the registers allow that still give a warp work). Short rows put TY
//   rows in one block so blocks stay large.
// * Rows too long for registers (more than 1024 threads' worth) or grad
//   accumulators too large for shared memory use a fallback that re-reads the
//   row from global memory (mostly served by L2): correct for any length.
// * Backward weight/bias gradients are column sums over all rows. A persistent
//   grid (as many blocks as fit on the GPU) walks the rows; each thread adds
//   g * xhat and g for the columns it owns, in registers where blocks of up to
//   512 threads hold the row (backward_register_sums_kernel), else into shared
//   memory (its own slots, thread-major so banks do not conflict); the block
//   then writes partial[block, cols] in float32 and a second kernel sums the
//   partials in a fixed order. No atomics: results are bitwise the same run to
//   run.
// * 16-byte vectors need every pointer 16-byte aligned and cols % vector width
//   == 0; otherwise the same kernels run with one element per access.
// * Rows run over gridDim.x with a grid-stride loop (never gridDim.y), and
//   every index over tensor sizes is int64.
#pragma once

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>

#include "wheelops/kernels/norm.h"
#include "wheelops/block_reduce.cuh"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/narrowing.h"
#include "wheelops/occupancy.cuh"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops::norm::cuda_impl {
namespace {

using wheelops::cuda::kWarpSize;
using wheelops::cuda::SumOp;
using wheelops::cuda::Vec;
using wheelops::cuda::warp_allreduce;

constexpr int kMaxThreads = 1024;
// Rows per block when a row spans more than one warp (TX >= 64): 1024 / 64.
constexpr int kMaxGroups = kMaxThreads / (2 * kWarpSize);
constexpr int kForwardBlockThreads = 256;
constexpr int kBackwardBlockThreads = 512;
// Keep room for several backward blocks per SM where the columns allow it.
constexpr size_t kPreferredBackwardSmem = 96 * 1024;
// Blocks of the backward that keeps its column sums in registers: up to 128
// registers a thread.
constexpr int kRegisterSumsThreads = 512;
// Two such blocks an SM (64 registers a thread) where the kernel fits them
// without spilling: float16 rms_norm (cuobjdump: no stack), which then runs
// 1.2x faster with two rows in flight an SM (H200, 8192x8192). Everywhere else
// the bound spilled (bfloat16 layer_norm 144 bytes of stack, 1.4x slower), so
// one block of up to 128 registers.
template <typename T, bool kCentered>
constexpr int kRegisterSumsBlocksPerSm = std::is_same_v<T, c10::Half> && !kCentered ? 2 : 1;

__device__ __forceinline__ float sqrt_(float v) { return sqrtf(v); }
__device__ __forceinline__ double sqrt_(double v) { return sqrt(v); }

// Sums over the TX threads of this thread's row group (threadIdx.y). Every
// thread of the block must call it (it synchronises when TX > 32).
// scratch: __shared__ A[kMaxGroups * 2 * kWarpSize].
template <typename A>
__device__ __forceinline__ void row_sum2(A& first, A& second, A* scratch) {
  first = warp_allreduce(first, SumOp{});
  second = warp_allreduce(second, SumOp{});
  if (blockDim.x == kWarpSize) {
    return;
  }
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  A* s = scratch + threadIdx.y * 2 * kWarpSize;
  __syncthreads();  // a previous call may still be reading scratch
  if (lane == 0) {
    s[warp] = first;
    s[kWarpSize + warp] = second;
  }
  __syncthreads();
  first = warp_allreduce(lane < warps ? s[lane] : A(0), SumOp{});
  second = warp_allreduce(lane < warps ? s[kWarpSize + lane] : A(0), SumOp{});
}

template <typename A>
__device__ __forceinline__ A row_sum(A value, A* scratch) {
  A unused = A(0);
  row_sum2(value, unused, scratch);
  return value;
}

template <typename T, int kVec>
__device__ __forceinline__ Vec<T, kVec> filled(T value) {
  Vec<T, kVec> v;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    v.val[j] = value;
  }
  return v;
}

// The vec_index-th vector at p, or zeros where !load. A 16-byte vector is
// loaded as four 32-bit words into zeroed registers: selecting per element
// instead cost a PRMT per 16-bit value.
template <typename T, int kVec>
__device__ __forceinline__ Vec<T, kVec> load_vec_or_zeros(const T* p, int64_t vec_index, bool load) {
  if constexpr (sizeof(Vec<T, kVec>) == sizeof(uint4)) {
    uint4 bits = make_uint4(0, 0, 0, 0);
    if (load) {
      bits = reinterpret_cast<const uint4*>(p)[vec_index];
    }
    Vec<T, kVec> v;
    memcpy(&v, &bits, sizeof(bits));
    return v;
  } else {
    return load ? cuda::load_vec<T, kVec>(p, vec_index) : filled<T, kVec>(T(0));
  }
}

template <typename A>
__device__ __forceinline__ A rstd_of(A sum_sq, int64_t cols, A eps) {
  const A var = cols > 0 ? sum_sq / static_cast<A>(cols) : A(0);
  return A(1) / sqrt_(var + eps);
}

// ---------------------------------------------------------------- forward

// rstd from the row's sums of d and d^2 over the centred values d. layer_norm
// also folds sum(d) back into the offset (the corrected two-pass algorithm:
// the first pass's rounding is measured and removed), reduced with d^2 at no
// extra cost; rms_norm reduces d^2 only.
template <bool kCentered, typename A>
__device__ __forceinline__ A centred_rstd(
    A sum_sq, A sum_d, A& offset, int64_t cols, A eps, A* scratch) {
  if constexpr (kCentered) {
    row_sum2(sum_sq, sum_d, scratch);
    if (cols > 0) {
      const A correction = sum_d / static_cast<A>(cols);
      offset += correction;
      sum_sq -= sum_d * correction;
    }
  } else {
    sum_sq = row_sum(sum_sq, scratch);
  }
  return rstd_of(sum_sq, cols, eps);
}

// The row's first value, the shift of its mean: mean = shift + offset with
// offset = mean(x - shift), and centred values are (x - shift) - offset. A
// constant row centres to exactly 0 (and normalizes to 0), and a large mean with
// a small spread loses nothing to cancellation. Every thread of the row reads
// the same address (one cached load).
template <typename T, typename A>
__device__ __forceinline__ A row_shift(const T* __restrict__ xr, int64_t cols) {
  return cols > 0 ? static_cast<A>(xr[0]) : A(0);
}

// Whether forward_registers_kernel converts a row once and keeps it as A (x -
// shift, then centred) rather than as stored: layer_norm in 16 bits, where each
// of the three passes then costs an add (and a multiply-add) an element, not a
// conversion and two subtractions (bfloat16 at 4096x4096 issued 1.5x Liger's
// instructions: ncu, H200); 1.05-1.08x faster from 4096x4096 up. Not for 32-bit
// rows (the kept row spilled under the 64-register bound: 1.2-1.26x slower), nor
// rms_norm, which converts but does not centre (no faster).
template <typename T, bool kCentered>
constexpr bool kRowAsAcc = kCentered && sizeof(T) == 2;

// Whether rows of exactly TX * kN vectors take forward_registers_kernel<..., kExact = true>,
// which drops the per-vector bounds checks and indexes in 32 bits: float rows, 1-5% faster
// from 4096 x 1024 up (H200, layer_norm and rms_norm, e.g. layer_norm 4096x1024 14.6 -> 13.8
// us, 4096x8192 73.9 -> 72.0); 16-bit rows were 1-7% slower with it (bf16 rms_norm 4096x1024
// 9.3 -> 10.0), so they keep the checked kernel (benchmarks/results/h200-2026-11-30-issues43-45b).
template <typename T, int kVec>
constexpr bool kExactRows = std::is_same_v<T, float> && kVec > 1;

// The i-th vector index of this thread in its row. kExact: the row is exactly
// blockDim.x * kN vectors (at most kMaxThreads * 8), so the index fits in 32 bits.
template <bool kExact>
__device__ __forceinline__ int64_t row_vec_index(int i) {
  if constexpr (kExact) {
    return static_cast<int>(threadIdx.x + i * blockDim.x);
  } else {
    return threadIdx.x + int64_t{i} * blockDim.x;
  }
}

// Whether forward_registers_kernel loads its threads' w and b once, before the rows: where a
// thread holds eight single elements of its row (odd or unaligned rows, one element an
// access), whose sixteen scalar w and b loads after the two reductions were the last link of
// the row's chain of latencies (load, reduce, reduce, load w and b, store). 1000x333 forward
// 1.09-1.18x faster, 8192x333 1.00-1.13x (H200, bf16/fp16/fp32, both norms). Not with fewer
// or wider loads a thread (one element: 4096x100 16-bit 2-5% slower; one 16-byte vector:
// 4096x64 and 4096x256 16-bit 1-8% slower; float32's two: 1-3% slower; H200,
// benchmarks/results/h200-2026-11-30-issues44-45c). Not for float64, whose sixteen w and b
// registers spilled (cuobjdump: 112 bytes of stack in layer_norm, 64 in rms_norm).
template <typename T, int kVec, int kN>
constexpr bool kWeightsFirst = kVec == 1 && kN == 8 && sizeof(T) < 8;

// out = (x - mean) * rstd * w + b for rows held in registers; block (TX, TY).
// kExact: every thread holds exactly kN vectors of its row (no bounds checks).
template <typename T, int kVec, int kN, bool kCentered, bool kExact>
__global__ void __launch_bounds__(kMaxThreads) forward_registers_kernel(
    const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
    T* __restrict__ out, acc_type<T>* __restrict__ mean_out, acc_type<T>* __restrict__ rstd_out,
    int64_t rows, int64_t cols, acc_type<T> eps) {
  using A = acc_type<T>;
  constexpr bool kAsAcc = kRowAsAcc<T, kCentered>;
  __shared__ A scratch[kMaxGroups * 2 * kWarpSize];
  const int64_t vecs = cols / kVec;
  const int64_t row_step = int64_t{gridDim.x} * blockDim.y;
  constexpr bool kFirst = kWeightsFirst<T, kVec, kN>;
  Vec<T, kVec> w_first[kFirst ? kN : 1], b_first[kFirst ? kN : 1];
  if constexpr (kFirst) {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int64_t idx = row_vec_index<kExact>(i);
      const bool in_row = kExact || idx < vecs;
      w_first[i] = load_vec_or_zeros<T, kVec>(w, idx, w != nullptr && in_row);
      b_first[i] = load_vec_or_zeros<T, kVec>(b, idx, b != nullptr && in_row);
    }
  }
  for (int64_t row0 = int64_t{blockIdx.x} * blockDim.y; row0 < rows; row0 += row_step) {
    const int64_t row = row0 + threadIdx.y;
    const bool active = row < rows;
    const T* xr = x + (active ? row : 0) * cols;
    Vec<T, kVec> v[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int64_t idx = row_vec_index<kExact>(i);
      v[i] = load_vec_or_zeros<T, kVec>(xr, idx, active && (kExact || idx < vecs));
    }
    // kAsAcc: x - shift, then minus the first offset; 0 past the row's end.
    A d[kAsAcc ? kN : 1][kVec];
    A shift = A(0);  // rms_norm: no centring
    A offset = A(0);
    if constexpr (kCentered) {
      shift = row_shift<T, A>(xr, cols);
      A sum = A(0);
#pragma unroll
      for (int i = 0; i < kN; ++i) {
        const int64_t idx = row_vec_index<kExact>(i);
        if constexpr (kAsAcc) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            d[i][j] = kExact || idx < vecs ? static_cast<A>(v[i].val[j]) - shift : A(0);
            sum += d[i][j];
          }
        } else if (kExact || idx < vecs) {  // padding would add (0 - shift)
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            sum += static_cast<A>(v[i].val[j]) - shift;
          }
        }
      }
      sum = row_sum(sum, scratch);
      offset = cols > 0 ? sum / static_cast<A>(cols) : A(0);
    }
    A sum_sq = A(0);
    A sum_d = A(0);
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int64_t idx = row_vec_index<kExact>(i);
      if (kExact || idx < vecs) {  // padding would add its own square
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          A c;
          if constexpr (kAsAcc) {
            c = d[i][j] -= offset;
          } else {
            c = (static_cast<A>(v[i].val[j]) - shift) - offset;
          }
          sum_sq += c * c;
          sum_d += c;
        }
      }
    }
    const A first_offset = offset;
    const A rstd = centred_rstd<kCentered>(sum_sq, sum_d, offset, cols, eps, scratch);
    if (!active) {
      continue;
    }
    if (threadIdx.x == 0 && rstd_out != nullptr) {  // null: no statistics saved
      if constexpr (kCentered) {
        mean_out[row] = shift + offset;
      }
      rstd_out[row] = rstd;
    }
    const A correction = offset - first_offset;  // kAsAcc: d is centred on the first offset
    // kAsAcc: (d - correction) * rstd as one multiply-add, d * rstd - correction * rstd; the
    // correction is the second pass's tiny residue of the mean, so its product rounds away
    // nothing the output keeps, and an add an element fewer is issued.
    const A correction_term = -correction * rstd;
    T* outr = out + row * cols;
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int64_t idx = row_vec_index<kExact>(i);
      if (kExact || idx < vecs) {
        Vec<T, kVec> wv, bv;
        if constexpr (kFirst) {
          wv = w_first[i];
          bv = b_first[i];
        } else {
          wv = load_vec_or_zeros<T, kVec>(w, idx, w != nullptr);
          bv = load_vec_or_zeros<T, kVec>(b, idx, b != nullptr);
        }
        Vec<T, kVec> y;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          A r;
          if constexpr (kAsAcc) {
            r = fmaf(d[i][j], rstd, correction_term);
          } else {
            r = ((static_cast<A>(v[i].val[j]) - shift) - offset) * rstd;
          }
          if (w != nullptr) {
            r *= static_cast<A>(wv.val[j]);
          }
          if (b != nullptr) {
            r += static_cast<A>(bv.val[j]);
          }
          y.val[j] = static_cast<T>(r);
        }
        cuda::store_vec<T, kVec>(outr, idx, y);
      }
    }
  }
}

// The same for rows of any length, re-reading the row; one row per block (TY = 1).
template <typename T, int kVec, bool kCentered>
__global__ void __launch_bounds__(kMaxThreads) forward_long_rows_kernel(
    const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
    T* __restrict__ out, acc_type<T>* __restrict__ mean_out, acc_type<T>* __restrict__ rstd_out,
    int64_t rows, int64_t cols, acc_type<T> eps) {
  using A = acc_type<T>;
  __shared__ A scratch[kMaxGroups * 2 * kWarpSize];
  const int64_t vecs = cols / kVec;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    A shift = A(0);  // rms_norm: no centring
    A offset = A(0);
    if constexpr (kCentered) {
      shift = row_shift<T, A>(xr, cols);
      A sum = A(0);
      for (int64_t idx = threadIdx.x; idx < vecs; idx += blockDim.x) {
        const Vec<T, kVec> v = cuda::load_vec<T, kVec>(xr, idx);
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          sum += static_cast<A>(v.val[j]) - shift;
        }
      }
      sum = row_sum(sum, scratch);
      offset = cols > 0 ? sum / static_cast<A>(cols) : A(0);
    }
    A sum_sq = A(0);
    A sum_d = A(0);
    for (int64_t idx = threadIdx.x; idx < vecs; idx += blockDim.x) {
      const Vec<T, kVec> v = cuda::load_vec<T, kVec>(xr, idx);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const A d = (static_cast<A>(v.val[j]) - shift) - offset;
        sum_sq += d * d;
        sum_d += d;
      }
    }
    const A rstd = centred_rstd<kCentered>(sum_sq, sum_d, offset, cols, eps, scratch);
    if (threadIdx.x == 0 && rstd_out != nullptr) {  // null: no statistics saved
      if constexpr (kCentered) {
        mean_out[row] = shift + offset;
      }
      rstd_out[row] = rstd;
    }
    T* outr = out + row * cols;
    for (int64_t idx = threadIdx.x; idx < vecs; idx += blockDim.x) {
      const Vec<T, kVec> v = cuda::load_vec<T, kVec>(xr, idx);
      const Vec<T, kVec> wv =
          w != nullptr ? cuda::load_vec<T, kVec>(w, idx) : filled<T, kVec>(T(0));
      const Vec<T, kVec> bv =
          b != nullptr ? cuda::load_vec<T, kVec>(b, idx) : filled<T, kVec>(T(0));
      Vec<T, kVec> y;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        A r = ((static_cast<A>(v.val[j]) - shift) - offset) * rstd;
        if (w != nullptr) {
          r *= static_cast<A>(wv.val[j]);
        }
        if (b != nullptr) {
          r += static_cast<A>(bv.val[j]);
        }
        y.val[j] = static_cast<T>(r);
      }
      cuda::store_vec<T, kVec>(outr, idx, y);
    }
  }
}

// --------------------------------------------------------------- backward

// Where the weight/bias gradient sums go: per-block shared accumulators, laid
// out [TY][slots][kN][kVec][TX] (thread-major: a warp's accesses hit distinct
// banks), then partial[block][slots][cols].
template <typename A>
struct Partials {
  A* partial;    // [gridDim.x][slots][cols], or null when no column sums are wanted
  int weight;    // slot of the weight gradient, -1 if not wanted
  int bias;      // slot of the bias gradient, -1 if not wanted
  int slots;     // number of wanted sums (0, 1 or 2)
};

// partial[block][slot][col] = the block's column sums: the sum over its row
// groups, in a fixed order, of acc laid out [TY][slots][kN][kVec][TX] (slot s
// of a group decodes to (sum, i, j, tx)). After a barrier.
template <typename A, int kVec, int kN>
__device__ __forceinline__ void write_block_partials(const A* acc, Partials<A> sums, int64_t cols) {
  const int TX = blockDim.x;
  const int64_t group_size = int64_t{sums.slots} * kN * kVec * TX;
  const int threads = TX * blockDim.y;
  for (int s = threadIdx.y * TX + threadIdx.x; s < group_size; s += threads) {
    A total = A(0);
    for (int y = 0; y < static_cast<int>(blockDim.y); ++y) {
      total += acc[y * group_size + s];
    }
    const int t = s % TX;
    int rest = s / TX;
    const int j = rest % kVec;
    rest /= kVec;
    const int i = rest % kN;
    const int slot = rest / kN;
    const int64_t col = (int64_t{i} * TX + t) * kVec + j;
    if (col < cols) {
      sums.partial[(int64_t{blockIdx.x} * sums.slots + slot) * cols + col] = total;
    }
  }
}

// grad_x = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) (rms_norm: no
// mean(g*w) term) for rows held in registers, and the column sums of g*xhat
// and g for this block's rows.
template <typename T, int kVec, int kN, bool kCentered>
__global__ void __launch_bounds__(kMaxThreads) backward_registers_kernel(
    const T* __restrict__ grad, const T* __restrict__ x, const acc_type<T>* __restrict__ mean,
    const acc_type<T>* __restrict__ rstd, const T* __restrict__ w, T* __restrict__ grad_x,
    Partials<acc_type<T>> sums, int64_t rows, int64_t cols) {
  using A = acc_type<T>;
  __shared__ A scratch[kMaxGroups * 2 * kWarpSize];
  extern __shared__ __align__(16) unsigned char acc_bytes[];
  A* acc = reinterpret_cast<A*>(acc_bytes);
  const int tx = threadIdx.x;
  const int TX = blockDim.x;
  const int per_slot = kN * kVec * TX;              // accumulators per (row group, slot)
  A* my_acc = acc + int64_t{threadIdx.y} * sums.slots * per_slot + tx;
  const bool want_sums = sums.partial != nullptr;
  A* const acc_w = sums.weight >= 0 ? my_acc + sums.weight * per_slot : nullptr;
  A* const acc_b = sums.bias >= 0 ? my_acc + sums.bias * per_slot : nullptr;
  if (want_sums) {
    for (int k = 0; k < sums.slots * kN * kVec; ++k) {
      my_acc[k * TX] = A(0);
    }
  }
  const int64_t vecs = cols / kVec;
  const int64_t row_step = int64_t{gridDim.x} * blockDim.y;
  for (int64_t row0 = int64_t{blockIdx.x} * blockDim.y; row0 < rows; row0 += row_step) {
    const int64_t row = row0 + threadIdx.y;
    const bool active = row < rows;
    const int64_t base = (active ? row : 0) * cols;
    const A mu = kCentered && active ? mean[row] : A(0);
    const A rs = active ? rstd[row] : A(0);
    Vec<T, kVec> xv[kN];
    Vec<T, kVec> gv[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int64_t idx = tx + int64_t{i} * TX;
      const bool in_row = active && idx < vecs;
      xv[i] = load_vec_or_zeros<T, kVec>(x + base, idx, in_row);
      gv[i] = load_vec_or_zeros<T, kVec>(grad + base, idx, in_row);
    }
    A dot = A(0);  // sum of g*w*xhat
    A sum = A(0);  // sum of g*w
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int64_t idx = tx + int64_t{i} * TX;
      const Vec<T, kVec> wv = load_vec_or_zeros<T, kVec>(w, idx, w != nullptr && idx < vecs);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const A xhat = (static_cast<A>(xv[i].val[j]) - mu) * rs;
        const A g = static_cast<A>(gv[i].val[j]);
        const A gw = w != nullptr ? g * static_cast<A>(wv.val[j]) : g;
        dot += gw * xhat;
        sum += gw;
        // Padding and inactive rows add exact zeros.
        if (acc_w != nullptr) {
          acc_w[(i * kVec + j) * TX] += g * xhat;
        }
        if (acc_b != nullptr) {
          acc_b[(i * kVec + j) * TX] += g;
        }
      }
    }
    row_sum2(dot, sum, scratch);
    if (grad_x == nullptr || !active) {
      continue;
    }
    const A mean_dot = cols > 0 ? dot / static_cast<A>(cols) : A(0);
    const A mean_gw = kCentered && cols > 0 ? sum / static_cast<A>(cols) : A(0);
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int64_t idx = tx + int64_t{i} * TX;
      if (idx < vecs) {
        const Vec<T, kVec> wv = load_vec_or_zeros<T, kVec>(w, idx, w != nullptr);
        Vec<T, kVec> dx;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const A xhat = (static_cast<A>(xv[i].val[j]) - mu) * rs;
          const A g = static_cast<A>(gv[i].val[j]);
          const A gw = w != nullptr ? g * static_cast<A>(wv.val[j]) : g;
          dx.val[j] = static_cast<T>(rs * (gw - mean_gw - xhat * mean_dot));
        }
        cuda::store_vec<T, kVec>(grad_x + base, idx, dx);
      }
    }
  }
  if (want_sums) {
    __syncthreads();
    write_block_partials<A, kVec, kN>(acc, sums, cols);
  }
}

// The same for blocks of at most kRegisterSumsThreads threads, with each
// thread's column sums in registers for all its rows (one shared-memory pass at
// the end, not a read-modify-write per element) and the weight read once: the
// per-element work is the formula's arithmetic and the conversions of x, g and
// w. w may be null (all ones); grad_x may be (column sums only: no row
// reductions, no stores).
template <typename T, int kVec, int kN, bool kCentered>
__global__ void __launch_bounds__(kRegisterSumsThreads, kRegisterSumsBlocksPerSm<T, kCentered>)
    backward_register_sums_kernel(
    const T* __restrict__ grad, const T* __restrict__ x, const acc_type<T>* __restrict__ mean,
    const acc_type<T>* __restrict__ rstd, const T* __restrict__ w, T* __restrict__ grad_x,
    Partials<acc_type<T>> sums, int64_t rows, int64_t cols) {
  using A = acc_type<T>;
  constexpr int kElems = kN * kVec;
  __shared__ A scratch[kMaxGroups * 2 * kWarpSize];
  extern __shared__ __align__(16) unsigned char acc_bytes[];
  const int tx = threadIdx.x;
  const int TX = blockDim.x;
  const int64_t vecs = cols / kVec;
  bool in_row[kN];
  Vec<T, kVec> wv[kN];  // as stored: half the registers of float for 16-bit types
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const int64_t idx = tx + int64_t{i} * TX;
    in_row[i] = idx < vecs;
    wv[i] = w != nullptr ? load_vec_or_zeros<T, kVec>(w, idx, in_row[i]) : filled<T, kVec>(T(1));
  }
  // This thread's columns, over its rows: sums of g*xhat, and of g for
  // layer_norm's bias (rms_norm has none).
  constexpr int kBiasElems = kCentered ? kElems : 0;
  A sum_w[kElems];
  A sum_b[kBiasElems > 0 ? kBiasElems : 1];
#pragma unroll
  for (int k = 0; k < kElems; ++k) {
    sum_w[k] = A(0);
    if constexpr (kCentered) {
      sum_b[k] = A(0);
    }
  }
  const int64_t row_step = int64_t{gridDim.x} * blockDim.y;
  for (int64_t row0 = int64_t{blockIdx.x} * blockDim.y; row0 < rows; row0 += row_step) {
    const int64_t row = row0 + threadIdx.y;
    const bool active = row < rows;
    const T* xr = x + (active ? row : 0) * cols;
    const T* gr = grad + (active ? row : 0) * cols;
    const A mu = kCentered && active ? mean[row] : A(0);
    const A rs = active ? rstd[row] : A(0);
    Vec<T, kVec> xv[kN];
    Vec<T, kVec> gv[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      const int64_t idx = tx + int64_t{i} * TX;
      const bool load = active && in_row[i];
      xv[i] = load_vec_or_zeros<T, kVec>(xr, idx, load);
      gv[i] = load_vec_or_zeros<T, kVec>(gr, idx, load);
    }
    A dot = A(0);  // sum of g*w*xhat
    A sum = A(0);  // sum of g*w
#pragma unroll
    for (int i = 0; i < kN; ++i) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        // Padding and inactive rows add exact zeros (x = g = 0, rs = 0).
        const A xhat = (static_cast<A>(xv[i].val[j]) - mu) * rs;
        const A g = static_cast<A>(gv[i].val[j]);
        const A gw = g * static_cast<A>(wv[i].val[j]);
        dot += gw * xhat;
        sum += gw;
        sum_w[i * kVec + j] += g * xhat;
        if constexpr (kCentered) {
          sum_b[i * kVec + j] += g;
        }
      }
    }
    if (grad_x == nullptr) {  // the same for the whole block: no barrier is skipped by some
      continue;
    }
    row_sum2(dot, sum, scratch);
    const A mean_dot = cols > 0 ? dot / static_cast<A>(cols) : A(0);
    const A mean_gw = kCentered && cols > 0 ? sum / static_cast<A>(cols) : A(0);
    T* dxr = grad_x + (active ? row : 0) * cols;
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      if (active && in_row[i]) {
        Vec<T, kVec> dx;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const A xhat = (static_cast<A>(xv[i].val[j]) - mu) * rs;
          const A gw = static_cast<A>(gv[i].val[j]) * static_cast<A>(wv[i].val[j]);
          dx.val[j] = static_cast<T>(rs * (gw - mean_gw - xhat * mean_dot));
        }
        cuda::store_vec<T, kVec>(dxr, tx + int64_t{i} * TX, dx);
      }
    }
  }
  if (sums.partial == nullptr) {
    return;
  }
  A* acc = reinterpret_cast<A*>(acc_bytes);
  A* my_acc = acc + int64_t{threadIdx.y} * sums.slots * kElems * TX + tx;
#pragma unroll
  for (int k = 0; k < kElems; ++k) {
    if (sums.weight >= 0) {
      my_acc[(sums.weight * kElems + k) * TX] = sum_w[k];
    }
    if constexpr (kCentered) {
      if (sums.bias >= 0) {
        my_acc[(sums.bias * kElems + k) * TX] = sum_b[k];
      }
    }
  }
  __syncthreads();
  write_block_partials<A, kVec, kN>(acc, sums, cols);
}

// grad_x for rows of any length, re-reading the row; one row per block.
template <typename T, int kVec, bool kCentered>
__global__ void __launch_bounds__(kMaxThreads) backward_long_rows_kernel(
    const T* __restrict__ grad, const T* __restrict__ x, const acc_type<T>* __restrict__ mean,
    const acc_type<T>* __restrict__ rstd, const T* __restrict__ w, T* __restrict__ grad_x,
    int64_t rows, int64_t cols) {
  using A = acc_type<T>;
  __shared__ A scratch[kMaxGroups * 2 * kWarpSize];
  const int64_t vecs = cols / kVec;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * cols;
    const A mu = kCentered ? mean[row] : A(0);
    const A rs = rstd[row];
    A dot = A(0);
    A sum = A(0);
    for (int64_t idx = threadIdx.x; idx < vecs; idx += blockDim.x) {
      const Vec<T, kVec> xv = cuda::load_vec<T, kVec>(x + base, idx);
      const Vec<T, kVec> gv = cuda::load_vec<T, kVec>(grad + base, idx);
      const Vec<T, kVec> wv =
          w != nullptr ? cuda::load_vec<T, kVec>(w, idx) : filled<T, kVec>(T(0));
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const A xhat = (static_cast<A>(xv.val[j]) - mu) * rs;
        const A g = static_cast<A>(gv.val[j]);
        const A gw = w != nullptr ? g * static_cast<A>(wv.val[j]) : g;
        dot += gw * xhat;
        sum += gw;
      }
    }
    row_sum2(dot, sum, scratch);
    const A mean_dot = cols > 0 ? dot / static_cast<A>(cols) : A(0);
    const A mean_gw = kCentered && cols > 0 ? sum / static_cast<A>(cols) : A(0);
    for (int64_t idx = threadIdx.x; idx < vecs; idx += blockDim.x) {
      const Vec<T, kVec> xv = cuda::load_vec<T, kVec>(x + base, idx);
      const Vec<T, kVec> gv = cuda::load_vec<T, kVec>(grad + base, idx);
      const Vec<T, kVec> wv =
          w != nullptr ? cuda::load_vec<T, kVec>(w, idx) : filled<T, kVec>(T(0));
      Vec<T, kVec> dx;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const A xhat = (static_cast<A>(xv.val[j]) - mu) * rs;
        const A g = static_cast<A>(gv.val[j]);
        const A gw = w != nullptr ? g * static_cast<A>(wv.val[j]) : g;
        dx.val[j] = static_cast<T>(rs * (gw - mean_gw - xhat * mean_dot));
      }
      cuda::store_vec<T, kVec>(grad_x + base, idx, dx);
    }
  }
}

constexpr int kColumnTileX = 32;
constexpr int kColumnTileY = 8;

// Column sums of g*xhat and g for the fallback path: block (32 columns, 8 row
// lanes), rows strided over gridDim.y splits; writes partial[blockIdx.y].
template <typename T, bool kCentered>
__global__ void column_sums_kernel(
    const T* __restrict__ grad, const T* __restrict__ x, const acc_type<T>* __restrict__ mean,
    const acc_type<T>* __restrict__ rstd, Partials<acc_type<T>> sums, int64_t rows,
    int64_t cols) {
  using A = acc_type<T>;
  __shared__ A shared[2][kColumnTileY][kColumnTileX];
  const int64_t col = int64_t{blockIdx.x} * kColumnTileX + threadIdx.x;
  A sum_w = A(0);
  A sum_b = A(0);
  if (col < cols) {
    const int64_t step = int64_t{gridDim.y} * kColumnTileY;
    for (int64_t r = int64_t{blockIdx.y} * kColumnTileY + threadIdx.y; r < rows; r += step) {
      const A g = static_cast<A>(grad[r * cols + col]);
      const A mu = kCentered ? mean[r] : A(0);
      sum_w += g * ((static_cast<A>(x[r * cols + col]) - mu) * rstd[r]);
      sum_b += g;
    }
  }
  shared[0][threadIdx.y][threadIdx.x] = sum_w;
  shared[1][threadIdx.y][threadIdx.x] = sum_b;
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) {
    return;
  }
  for (int y = 1; y < kColumnTileY; ++y) {
    sum_w += shared[0][y][threadIdx.x];
    sum_b += shared[1][y][threadIdx.x];
  }
  A* out = sums.partial + int64_t{blockIdx.y} * sums.slots * cols;
  if (sums.weight >= 0) {
    out[sums.weight * cols + col] = sum_w;
  }
  if (sums.bias >= 0) {
    out[sums.bias * cols + col] = sum_b;
  }
}

constexpr int kSumTile = 32;

// out[slot][col] = sum over splits of partial[split][slot][col], in a fixed
// order: block (32 columns, 32 split lanes), lanes combined in lane order.
template <typename T>
__global__ void sum_partials_kernel(
    const acc_type<T>* __restrict__ partial, int64_t splits, int64_t width,
    T* __restrict__ first, T* __restrict__ second, int64_t cols) {
  using A = acc_type<T>;
  __shared__ A shared[kSumTile][kSumTile + 1];
  const int64_t c = int64_t{blockIdx.x} * kSumTile + threadIdx.x;
  A total = A(0);
  if (c < width) {
    for (int64_t s = threadIdx.y; s < splits; s += kSumTile) {
      total += partial[s * width + c];
    }
  }
  shared[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.y != 0 || c >= width) {
    return;
  }
  for (int y = 1; y < kSumTile; ++y) {
    total += shared[y][threadIdx.x];
  }
  T* out = c < cols ? first : second;
  out[c < cols ? c : c - cols] = static_cast<T>(total);
}

// ------------------------------------------------------------------- host

struct RowConfig {
  int n = 0;   // vectors per thread; 0: the row does not fit in registers
  int tx = 0;  // threads per row
};

// The vectors-per-thread a kernel is instantiated for (ascending).
struct Allowed {
  int n[3];
  int count;
};

// Sized so that a row's slice stays within ~32 registers: forward, up to eight
// 16-byte vectors of float a thread and four of 16- and 64-bit types (bf16 at
// eight spilled and ran 5x slower); fewer in the backward, which holds two
// tensors; single elements (unaligned or odd rows) more per thread, at the same
// register cost.
template <typename T, int kVec, bool kBackward>
constexpr Allowed allowed_n() {
  if constexpr (kVec == 1) {
    return {{1, 4, 8}, 3};
  } else if constexpr (kBackward && sizeof(T) != 4) {
    return {{1, 2, 2}, 2};
  } else if constexpr (!kBackward && sizeof(T) == 4) {
    return {{2, 4, 8}, 3};
  } else {
    return {{1, 2, 4}, 3};
  }
}

// The most vectors per thread that still give a whole warp work, so a row has
// the fewest threads and the cheapest reductions: a 1024-column bf16 row on one
// warp (no block barrier) ran the forward 1.4x faster than on 128 threads, a
// 16384-column float row on 512 threads 1.2x faster than on 1024 (H200). A row
// that needs more than kMaxThreads threads even then does not fit (n = 0).
inline RowConfig pick_row_config(int64_t vecs, const Allowed& allowed) {
  int n = allowed.n[0];
  for (int k = allowed.count - 1; k >= 0; --k) {
    if (vecs >= int64_t{allowed.n[k]} * kWarpSize) {
      n = allowed.n[k];
      break;
    }
  }
  const int64_t need = (vecs + n - 1) / n;
  if (need > kMaxThreads) {
    return {};
  }
  // At least a warp: an empty row (0 columns) still gets its statistics written.
  const int64_t threads = (need + kWarpSize - 1) / kWarpSize * kWarpSize;
  return {n, static_cast<int>(threads > kWarpSize ? threads : kWarpSize)};
}

// The forward's: one warp a row wherever an allowed n fits the whole row in one warp (the
// smallest such n), so its reductions need no block barrier or shared memory; otherwise
// pick_row_config's. Where that changes the launch (rows that took two to four warps: 33-255
// single elements; 16-bit rows of 264-1016 columns, float32 of 260-1020, but 512), 4096 and
// 8192 rows ran 1.00-1.53x faster (H200: 4096x100 bf16 layer_norm 10.02 -> 6.67 us, 4096x768
// 1.08-1.32x). 1000 rows give the GPU under eight warps an SM, too few to hide a thread's
// longer chain of loads: 1000x100 0.91-0.98x, 1000x255 0.98-1.15x
// (benchmarks/results/h200-2026-11-30-issue45-rows). Twelve single elements a thread, for rows
// of 257-384, were not taken: with w and b loaded first the kernel spilled, and without them
// 1000x333 ran 0.7x.
inline RowConfig pick_forward_row_config(int64_t vecs, const Allowed& allowed) {
  for (int k = 0; k < allowed.count; ++k) {
    if (vecs <= int64_t{allowed.n[k]} * kWarpSize) {
      return {allowed.n[k], kWarpSize};
    }
  }
  return pick_row_config(vecs, allowed);
}

// fn(std::integral_constant<int, n>) for n, one of allowed_n's values.
template <typename T, int kVec, bool kBackward, typename Fn>
void dispatch_n(int n, Fn&& fn) {
  constexpr Allowed a = allowed_n<T, kVec, kBackward>();
  if (n == a.n[0]) {
    return fn(std::integral_constant<int, a.n[0]>{});
  }
  if (n == a.n[1]) {
    return fn(std::integral_constant<int, a.n[1]>{});
  }
  return fn(std::integral_constant<int, a.n[2]>{});
}

inline unsigned int capped_grid(int64_t wanted, int64_t cap) {
  const int64_t g = wanted < cap ? wanted : cap;
  return static_cast<unsigned int>(g > 0 ? g : 1);
}

inline int long_row_threads(int64_t vecs) {
  int t = kWarpSize;
  while (t < kMaxThreads && t < vecs) {
    t *= 2;
  }
  return t;
}

template <typename T, int kVec, bool kCentered>
void launch_forward(
    const T* x, const T* w, const T* b, T* out, acc_type<T>* mean, acc_type<T>* rstd,
    RowsCols shape, double eps, int32_t device, cudaStream_t stream, const char* op) {
  using A = acc_type<T>;
  const int64_t vecs = shape.cols / kVec;
  const int64_t sms = cuda::multiprocessor_count(device);
  const RowConfig cfg = pick_forward_row_config(vecs, allowed_n<T, kVec, false>());
  if (cfg.n == 0) {
    const int threads = long_row_threads(vecs);
    const unsigned int grid = capped_grid(shape.rows, sms * (2048 / threads) * 8);
    forward_long_rows_kernel<T, kVec, kCentered><<<grid, threads, 0, stream>>>(
        x, w, b, out, mean, rstd, shape.rows, shape.cols, round_to<A>(eps));
    WHEELOPS_CHECK_LAUNCH(op);
    return;
  }
  const bool exact = kExactRows<T, kVec> && int64_t{cfg.tx} * cfg.n == vecs;
  const int ty = cfg.tx >= kForwardBlockThreads ? 1 : kForwardBlockThreads / cfg.tx;
  const int64_t groups = (shape.rows + ty - 1) / ty;
  const unsigned int grid = capped_grid(groups, sms * (2048 / (cfg.tx * ty)) * 8);
  dispatch_n<T, kVec, false>(cfg.n, [&](auto n) {
    constexpr int kN = decltype(n)::value;
    if constexpr (kExactRows<T, kVec>) {
      if (exact) {
        forward_registers_kernel<T, kVec, kN, kCentered, true>
            <<<grid, dim3(cfg.tx, ty), 0, stream>>>(
                x, w, b, out, mean, rstd, shape.rows, shape.cols, round_to<A>(eps));
        return;
      }
    }
    forward_registers_kernel<T, kVec, kN, kCentered, false>
        <<<grid, dim3(cfg.tx, ty), 0, stream>>>(
            x, w, b, out, mean, rstd, shape.rows, shape.cols, round_to<A>(eps));
  });
  WHEELOPS_CHECK_LAUNCH(op);
}

// Cached per device: backward asks on every call, and the answer never changes.
inline int max_dynamic_smem(int32_t device, const char* op) {
  static std::array<std::atomic<int>, cuda::kMaxDevices> cache{};
  const bool cached = device >= 0 && device < cuda::kMaxDevices;
  int bytes = cached ? cache[device].load(std::memory_order_relaxed) : 0;
  if (bytes == 0) {
    WHEELOPS_CUDA_CHECK(
        cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), op);
    if (cached) {
      cache[device].store(bytes, std::memory_order_relaxed);
    }
  }
  return bytes;
}

// Lets kKernel take `bytes` of dynamic shared memory. The attribute is set only
// when a call needs more than any earlier one on that device (not on every
// launch); the kernel is a template argument so that each has its own record.
// The attribute belongs to the kernel, not to the launch, so it must only ever
// grow: two threads setting it at once could otherwise leave it below what the
// other is about to launch with (cudaErrorInvalidValue). Raising it happens
// under a lock; the common case, already allowed, takes none.
template <auto kKernel>
void allow_dynamic_smem(size_t bytes, int32_t device, const char* op) {
  static std::array<std::atomic<size_t>, cuda::kMaxDevices> allowed{};
  static std::mutex raising;
  const bool cached = device >= 0 && device < cuda::kMaxDevices;
  if (cached && bytes <= allowed[device].load(std::memory_order_acquire)) {
    return;
  }
  const std::lock_guard<std::mutex> lock(raising);
  if (cached && bytes <= allowed[device].load(std::memory_order_relaxed)) {
    return;  // another thread raised it meanwhile
  }
  WHEELOPS_CUDA_CHECK(
      cudaFuncSetAttribute(
          kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      op);
  if (cached) {
    allowed[device].store(bytes, std::memory_order_release);
  }
}

// Grad pointers of one backward call, T-typed.
template <typename T>
struct BackwardArgs {
  const T* grad;
  const T* x;
  const acc_type<T>* mean;
  const acc_type<T>* rstd;
  const T* w;
  T* grad_x;     // null: not wanted
  T* grad_w;     // null: not wanted
  T* grad_b;     // null: not wanted
};

template <typename T>
Partials<acc_type<T>> partial_layout(const BackwardArgs<T>& a) {
  Partials<acc_type<T>> p{nullptr, -1, -1, 0};
  if (a.grad_w != nullptr) {
    p.weight = p.slots++;
  }
  if (a.grad_b != nullptr) {
    p.bias = p.slots++;
  }
  return p;
}

// Sums partial[splits][slots][cols] into grad_w / grad_b (in slot order).
template <typename T>
void launch_sum_partials(
    const BackwardArgs<T>& a, const Partials<acc_type<T>>& p, int64_t splits, int64_t cols,
    cudaStream_t stream, const char* op) {
  const int64_t width = p.slots * cols;
  T* first = p.weight == 0 ? a.grad_w : a.grad_b;
  T* second = a.grad_b;  // only read when slots == 2, where slot 1 is the bias
  const unsigned int blocks = capped_grid((width + kSumTile - 1) / kSumTile, (int64_t{1} << 31) - 1);
  sum_partials_kernel<T><<<blocks, dim3(kSumTile, kSumTile), 0, stream>>>(
      p.partial, splits, width, first, second, cols);
  WHEELOPS_CHECK_LAUNCH(op);
}

template <typename T, int kVec, bool kCentered>
void launch_backward(
    BackwardArgs<T> a, const Tensor& like, RowsCols shape, int32_t device, cudaStream_t stream,
    const char* op) {
  using A = acc_type<T>;
  constexpr auto kAccType = std::is_same_v<A, double> ? ScalarType::Double : ScalarType::Float;
  Partials<A> p = partial_layout(a);
  const int64_t vecs = shape.cols / kVec;
  const int64_t sms = cuda::multiprocessor_count(device);
  const RowConfig cfg = pick_row_config(vecs, allowed_n<T, kVec, true>());
  // Shared accumulators per row group: slots x (the row's padded length).
  const size_t smem_per_group =
      size_t(p.slots) * size_t(cfg.n) * kVec * size_t(cfg.tx) * sizeof(A);
  const int smem_limit = max_dynamic_smem(device, op) - static_cast<int>(
      kMaxGroups * 2 * kWarpSize * sizeof(A));
  const bool registers = cfg.n > 0 && smem_per_group <= static_cast<size_t>(smem_limit);
  if (registers) {
    int ty = cfg.tx >= kBackwardBlockThreads ? 1 : kBackwardBlockThreads / cfg.tx;
    while (ty > 1 && smem_per_group * ty > kPreferredBackwardSmem) {
      ty /= 2;
    }
    const size_t smem = smem_per_group * ty;
    const int64_t groups = (shape.rows + ty - 1) / ty;
    // Column sums in registers where the block is small enough for them (the
    // shared-memory accumulators of the other kernel cost a read-modify-write
    // an element: layer_norm's backward 1.09-1.16x slower at 4096x8192 and
    // 8192x8192, H200).
    const bool register_sums = cfg.tx * ty <= kRegisterSumsThreads;
    dispatch_n<T, kVec, true>(cfg.n, [&](auto n) {
      constexpr int kN = decltype(n)::value;
      constexpr Allowed kAllowed = allowed_n<T, kVec, true>();
      auto run = [&](auto in_registers) {
        constexpr auto kernel = decltype(in_registers)::value
                                    ? backward_register_sums_kernel<T, kVec, kN, kCentered>
                                    : backward_registers_kernel<T, kVec, kN, kCentered>;
        allow_dynamic_smem<kernel>(smem, device, op);
        const int per_sm = cuda::resident_blocks_per_sm<kernel>(cfg.tx * ty, smem, device);
        // Persistent: every block resident, so the partials stay few.
        const unsigned int grid = capped_grid(groups, sms * per_sm);
        Tensor partial;
        if (p.slots > 0) {
          partial = allocate(like, {int64_t{grid}, int64_t{p.slots}, shape.cols}, kAccType);
          p.partial = partial.mutable_data_ptr<A>();
        }
        kernel<<<grid, dim3(cfg.tx, ty), smem, stream>>>(
            a.grad, a.x, a.mean, a.rstd, a.w, a.grad_x, p, shape.rows, shape.cols);
        WHEELOPS_CHECK_LAUNCH(op);
        if (p.slots > 0) {
          launch_sum_partials(a, p, grid, shape.cols, stream, op);
        }
      };
      // Only a row of more than 512 threads takes the shared-memory sums (a block
      // of one 1024-thread row), and only the largest n leaves a row that many
      // (pick_row_config), so only it has that kernel, built for a third (or,
      // where two n are allowed, half) of the n it used to be.
      if constexpr (kN == kAllowed.n[kAllowed.count - 1]) {
        if (!register_sums) {
          run(std::false_type{});
          return;
        }
      }
      WHEELOPS_CHECK(register_sums, op, ": internal error: no backward kernel for ", cfg.tx,
                     " x ", ty, " threads with ", kN, " vectors a thread");
      run(std::true_type{});
    });
    return;
  }
  if (a.grad_x != nullptr) {
    const int threads = long_row_threads(vecs);
    const unsigned int grid = capped_grid(shape.rows, sms * (2048 / threads) * 8);
    backward_long_rows_kernel<T, kVec, kCentered><<<grid, threads, 0, stream>>>(
        a.grad, a.x, a.mean, a.rstd, a.w, a.grad_x, shape.rows, shape.cols);
    WHEELOPS_CHECK_LAUNCH(op);
  }
  if (p.slots > 0) {
    const int64_t tiles = (shape.cols + kColumnTileX - 1) / kColumnTileX;
    const int64_t row_lanes = (shape.rows + kColumnTileY - 1) / kColumnTileY;
    int64_t splits = (sms * 8 + tiles - 1) / tiles;
    splits = splits < row_lanes ? splits : row_lanes;
    splits = splits < 1024 ? splits : 1024;
    splits = splits > 0 ? splits : 1;
    Tensor partial = allocate(like, {splits, int64_t{p.slots}, shape.cols}, kAccType);
    p.partial = partial.mutable_data_ptr<A>();
    const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(splits));
    column_sums_kernel<T, kCentered><<<grid, dim3(kColumnTileX, kColumnTileY), 0, stream>>>(
        a.grad, a.x, a.mean, a.rstd, p, shape.rows, shape.cols);
    WHEELOPS_CHECK_LAUNCH(op);
    launch_sum_partials(a, p, splits, shape.cols, stream, op);
  }
}

} // namespace

// The forward, with the statistics the backward needs (`stats`) or without (the
// inference ops).
template <bool kCentered>
Forward forward(
    const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    double eps, bool stats, const char* op) {
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  Forward f = prepare_forward<kCentered>(x, weight, bias, eps, stats, op);
  if (f.shape.rows == 0) {
    return f;
  }
  const cudaStream_t stream = cuda::current_stream(device, op);
  dispatch_float(f.x.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    const T* px = f.x.const_data_ptr<T>();
    const T* pw = data_or_null<T>(f.weight);
    const T* pb = data_or_null<T>(f.bias);
    T* po = f.out.mutable_data_ptr<T>();
    A* pm = kCentered ? mutable_data_or_null<A>(f.mean) : nullptr;
    A* pr = mutable_data_or_null<A>(f.rstd);
    constexpr int kVec = cuda::kVecSize<T>;
    if (cuda::can_vectorize<T>(f.shape.cols, {px, pw, pb, po})) {
      launch_forward<T, kVec, kCentered>(px, pw, pb, po, pm, pr, f.shape, eps, device, stream, op);
    } else {
      launch_forward<T, 1, kCentered>(px, pw, pb, po, pm, pr, f.shape, eps, device, stream, op);
    }
  });
  return f;
}

template <bool kCentered>
std::tuple<std::optional<Tensor>, std::optional<Tensor>, std::optional<Tensor>> backward(
    const Tensor& grad, const Tensor& x, const std::optional<Tensor>& mean, const Tensor& rstd,
    const std::optional<Tensor>& weight, bool x_grad, bool weight_grad, bool bias_grad,
    const char* op) {
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  Backward b =
      prepare_backward(grad, x, mean, rstd, weight, x_grad, weight_grad, bias_grad, op);
  if (b.shape.rows == 0 || b.shape.cols == 0) {
    // Nothing to read; column sums over no rows are zero.
    if (b.grad_weight.has_value()) {
      torch::stable::zero_(*b.grad_weight);
    }
    if (b.grad_bias.has_value()) {
      torch::stable::zero_(*b.grad_bias);
    }
    return {b.grad_x, b.grad_weight, b.grad_bias};
  }
  if (!x_grad && !weight_grad && !bias_grad) {
    return {b.grad_x, b.grad_weight, b.grad_bias};
  }
  const cudaStream_t stream = cuda::current_stream(device, op);
  dispatch_float(b.x.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    BackwardArgs<T> a{
        b.grad.const_data_ptr<T>(),
        b.x.const_data_ptr<T>(),
        kCentered ? b.mean->template const_data_ptr<A>() : nullptr,
        b.rstd.const_data_ptr<A>(),
        data_or_null<T>(b.weight),
        mutable_data_or_null<T>(b.grad_x),
        mutable_data_or_null<T>(b.grad_weight),
        mutable_data_or_null<T>(b.grad_bias)};
    constexpr int kVec = cuda::kVecSize<T>;
    if (cuda::can_vectorize<T>(b.shape.cols, {a.grad, a.x, a.w, a.grad_x})) {
      launch_backward<T, kVec, kCentered>(a, b.x, b.shape, device, stream, op);
    } else {
      launch_backward<T, 1, kCentered>(a, b.x, b.shape, device, stream, op);
    }
  });
  return {b.grad_x, b.grad_weight, b.grad_bias};
}

} // namespace wheelops::norm::cuda_impl
