// The fused GELU backward on CUDA, shared by bias_gelu and fused_linear_gelu (which
// calls it with no bias: its pre-activation holds it), so its kernels are compiled
// once into the library.
//
// x is viewed as [rows, cols]. A block is a tile of (column vectors) x (rows): each
// thread keeps its slice of bias in registers and walks down the rows, summing grad_x
// down its columns for grad_bias in two deterministic stages: per-block partial sums
// in a fixed order, then one pass over them.
#include <torch/csrc/stable/ops.h>

#include <optional>
#include <type_traits>

#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/kernels/gelu_16bit.cuh"
#include "wheelops/kernels/gelu_backward.h"
#include "wheelops/occupancy.cuh"
#include "wheelops/tensor_checks.h"
#include "wheelops/tensors.h"
#include "wheelops/vectorized.cuh"

namespace wheelops::gelu {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;
// Rows each thread loads before it computes: with one 16-byte vector per input
// per thread in flight, the tile grid did not keep enough bytes in flight
// (bf16 forward 63%, backward 54-58% of copy bandwidth). 16-bit rows take 4
// (with kBackwardMinBlocks' 2 below; H200, bf16 8192 x 8192: 2 rows 157 us, 4 rows
// 151 us); float keeps 2 (4 rows: 208 -> 225 us at 4096 x 16384).
template <typename T>
constexpr int kRowsPerStep = sizeof(T) == 2 ? 4 : 2;
// Column sums of the partials: a block is kSumCols columns x kSumSplits
// threads, each summing every kSumSplits-th partial row of its column.
constexpr int kSumCols = 32;
constexpr int kSumSplits = 32;
// Resident blocks per SM the register budget must allow. For float, left alone,
// ptxas spent registers on evaluating many erf's at once, which cut the resident
// threads as much as the unrolled rows added bytes in flight (4 blocks: 64
// registers). 16-bit rows need 2: at 4 blocks' 64 registers their kernels spilled
// (22 bytes at 2 rows, 192 at 4), and 2 ran faster (H200, bf16 8192 x 8192: 178 ->
// 157 us at 2 rows; float slower, 207 -> 271 us). Not for double, whose erf needs
// the registers (bounded, it spilled heavily). Measured again with the 16-bit erf of
// gelu_16bit.cuh (H200, bf16 8192 x 8192): 2 blocks of 4 rows 112.5 us (124 registers),
// 3 blocks of 2 rows 111.8 (80 registers) but 144.6 at 4096 x 16384, 4 blocks 149-228
// (spilling 32-176 bytes), 2 blocks of 2 rows 119.5.
template <typename T>
constexpr int kBackwardMinBlocks = sizeof(T) == 8 ? 1 : sizeof(T) == 2 ? 2 : 4;

struct TileGrid {
  dim3 block;
  dim3 grid;
};

// Tile shape for `col_vecs` column vectors and `rows` rows on `device`: one
// resident wave of `blocks_per_sm` blocks per SM (from the kernel's
// occupancy; a fixed 8 per SM left a partial second wave whenever a kernel
// needed more than 32 registers), each block row taking the same number of
// `rows_per_step`-row steps.
TileGrid tile_grid(
    int64_t col_vecs, int64_t rows, int blocks_per_sm, int rows_per_step, int32_t device) {
  int threads_x = 32;
  while (threads_x < kThreads && threads_x < col_vecs) {
    threads_x *= 2;
  }
  const int threads_y = kThreads / threads_x;
  const int64_t grid_x = (col_vecs + threads_x - 1) / threads_x;
  const int64_t wanted_blocks = int64_t{cuda::multiprocessor_count(device)} * blocks_per_sm;
  int64_t grid_y = (wanted_blocks + grid_x - 1) / grid_x;
  const int64_t rows_y = (rows + threads_y - 1) / threads_y;
  const int64_t steps_y = (rows_y + rows_per_step - 1) / rows_per_step;
  grid_y = grid_y < steps_y ? grid_y : steps_y;
  grid_y = grid_y < kMaxGridY ? grid_y : kMaxGridY;
  grid_y = grid_y > 0 ? grid_y : 1;
  const int64_t passes = (steps_y + grid_y - 1) / grid_y;
  grid_y = passes > 0 ? (steps_y + passes - 1) / passes : 1;
  return {dim3(threads_x, threads_y), dim3(static_cast<unsigned int>(grid_x),
                                           static_cast<unsigned int>(grid_y))};
}

// grad_x = grad * gelu'(x + bias) (a null bias: zero), and per block row the column
// sums of grad_x into partial[blockIdx.y, cols].
template <typename T, int kVec, gelu::Approximate kMode>
__global__ void __launch_bounds__(kThreads, kBackwardMinBlocks<T>) bias_gelu_backward_kernel(
    const T* __restrict__ grad, const T* __restrict__ x, const T* __restrict__ bias,
    T* __restrict__ grad_x, acc_type<T>* __restrict__ partial, int64_t rows, int64_t cols) {
  using A = acc_type<T>;
  extern __shared__ unsigned char shared_bytes[];
  A* shared = reinterpret_cast<A*>(shared_bytes);  // [blockDim.y][blockDim.x][kVec]

  const int64_t col_vec = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t col_vecs = cols / kVec;
  A sums[kVec] = {};
  if (col_vec < col_vecs) {
    cuda::Vec<T, kVec> b;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      b.val[j] = T(0);
    }
    if (bias != nullptr) {
      b = cuda::load_vec<T, kVec>(bias, col_vec);
    }
    const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
    // Rows are summed in increasing order (r0, r0 + row_stride, ...), a fixed
    // order for a given grid.
    for (int64_t r0 = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r0 < rows;
         r0 += row_stride * kRowsPerStep<T>) {
      cuda::Vec<T, kVec> g[kRowsPerStep<T>];
      cuda::Vec<T, kVec> v[kRowsPerStep<T>];
#pragma unroll
      for (int k = 0; k < kRowsPerStep<T>; ++k) {
        const int64_t r = r0 + k * row_stride;
        if (r < rows) {
          g[k] = cuda::load_vec<T, kVec>(grad, r * col_vecs + col_vec);
          v[k] = cuda::load_vec<T, kVec>(x, r * col_vecs + col_vec);
        }
      }
#pragma unroll
      for (int k = 0; k < kRowsPerStep<T>; ++k) {
        const int64_t r = r0 + k * row_stride;
        if (r < rows) {
          cuda::Vec<T, kVec> dx;
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const A u = static_cast<A>(v[k].val[j]) + static_cast<A>(b.val[j]);
            const A d = static_cast<A>(g[k].val[j]) * gelu::derivative_of<T, kMode>(u);
            dx.val[j] = static_cast<T>(d);
            sums[j] += d;
          }
          reinterpret_cast<cuda::Vec<T, kVec>*>(grad_x)[r * col_vecs + col_vec] = dx;
        }
      }
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

// grad_bias[c] = sum over s of partial[s, c]. One thread per column summing
// all partials (hundreds of dependent L2 reads on a handful of blocks) cost
// tens of microseconds; here kSumSplits threads share a column, each summing
// a fixed stride of partial rows, and the kSumSplits results are added in a
// fixed order: deterministic for a given grid.
template <typename T>
__global__ void __launch_bounds__(kSumCols * kSumSplits) sum_partials_kernel(
    const acc_type<T>* __restrict__ partial, T* __restrict__ grad_bias, int64_t splits,
    int64_t cols) {
  using A = acc_type<T>;
  __shared__ A shared[kSumSplits][kSumCols + 1];
  const int64_t c = int64_t{blockIdx.x} * kSumCols + threadIdx.x;
  A total = A(0);
  if (c < cols) {
#pragma unroll 4
    for (int64_t s = threadIdx.y; s < splits; s += kSumSplits) {
      total += partial[s * cols + c];
    }
  }
  shared[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    A sum = shared[0][threadIdx.x];
    for (int k = 1; k < kSumSplits; ++k) {
      sum += shared[k][threadIdx.x];
    }
    grad_bias[c] = static_cast<T>(sum);
  }
}

template <typename T, int kVec, gelu::Approximate kMode>
void launch_backward(
    const T* grad, const T* x, const T* bias, T* grad_x, T* grad_bias, const Tensor& like,
    RowsCols shape, int32_t device, cudaStream_t stream, const char* op) {
  using A = acc_type<T>;
  constexpr auto kAccType = std::is_same_v<A, double> ? ScalarType::Double : ScalarType::Float;
  // Dynamic shared memory: the block's column sums (a constant per kernel).
  const size_t shared = size_t{kThreads} * kVec * sizeof(A);
  constexpr auto kernel = bias_gelu_backward_kernel<T, kVec, kMode>;
  const int per_sm = cuda::resident_blocks_per_sm<kernel>(kThreads, shared, device);
  const TileGrid tg = tile_grid(shape.cols / kVec, shape.rows, per_sm, kRowsPerStep<T>, device);
  const int64_t splits = shape.rows > 0 ? tg.grid.y : 0;
  // Workspace from torch's caching allocator, on the current stream.
  Tensor partial = allocate(like, {splits > 0 ? splits : 1, shape.cols}, kAccType);
  A* partial_ptr = partial.mutable_data_ptr<A>();
  if (splits > 0) {
    kernel<<<tg.grid, tg.block, shared, stream>>>(
        grad, x, bias, grad_x, partial_ptr, shape.rows, shape.cols);
    WHEELOPS_CHECK_LAUNCH(op);
  }
  if (grad_bias != nullptr) {  // over no rows: zeros
    const auto sum_blocks = static_cast<unsigned int>((shape.cols + kSumCols - 1) / kSumCols);
    sum_partials_kernel<T><<<sum_blocks, dim3(kSumCols, kSumSplits), 0, stream>>>(
        partial_ptr, grad_bias, splits, shape.cols);
    WHEELOPS_CHECK_LAUNCH(op);
  }
}

} // namespace

void backward_into(
    const Tensor& grad, const Tensor& x, const std::optional<Tensor>& bias, Tensor& grad_x,
    std::optional<Tensor>& grad_bias, gelu::Approximate mode, const char* op) {
  const RowsCols shape = rows_cols(x);
  if (shape.cols == 0) {
    return;
  }
  const int32_t device = x.get_device_index();
  const cudaStream_t stream = cuda::current_stream(device, op);
  dispatch_float(x.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = grad.const_data_ptr<T>();
    const T* px = x.const_data_ptr<T>();
    const T* pb = bias.has_value() ? bias->const_data_ptr<T>() : nullptr;
    T* pgx = grad_x.mutable_data_ptr<T>();
    T* pgb = grad_bias.has_value() ? grad_bias->mutable_data_ptr<T>() : nullptr;
    const bool vec = cuda::can_vectorize<T>(shape.cols, {pg, px, pb, pgx});
    gelu::dispatch_mode(mode, [&](auto m) {
      constexpr gelu::Approximate kMode = decltype(m)::value;
      if (vec) {
        launch_backward<T, cuda::kVecSize<T>, kMode>(
            pg, px, pb, pgx, pgb, x, shape, device, stream, op);
      } else {
        launch_backward<T, 1, kMode>(pg, px, pb, pgx, pgb, x, shape, device, stream, op);
      }
    });
  });
}

} // namespace wheelops::gelu
