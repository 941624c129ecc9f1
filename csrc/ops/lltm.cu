// The fused elementwise part of the LLTM cell: CUDA kernels.
//
// gates [B, 3S] and the states [B, S] are walked as tiles of (column vectors)
// x (rows): a thread owns one column vector of S and strides down the rows, so
// it finds its three gate vectors at fixed offsets (c, S + c, 2S + c) of each
// gates row with no division. 16-byte vectors when S and every pointer allow
// them, one element per thread otherwise. Both passes are memory bound:
// forward moves 6 elements per state element (3 gates + old_cell in, new_h +
// new_cell out), backward 10 (grad_h, grad_cell, 3 gates, old_cell in;
// 3 d_gates + d_old_cell out); nothing else is saved or re-read.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <tuple>

#include "lltm.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops::lltm {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;

struct TileGrid {
  dim3 block;
  dim3 grid;
};

// Threads across the columns (a power of two, up to the whole block) and down
// the rows; enough blocks to fill the GPU several times, as the work allows.
TileGrid tile_grid(int64_t col_vecs, int64_t rows, int32_t device) {
  int threads_x = 1;
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
using V = cuda::Vec<T, kVec>;

template <typename T, int kVec>
__device__ __forceinline__ V<T, kVec> load(const T* p, int64_t element) {
  return *reinterpret_cast<const V<T, kVec>*>(p + element);
}

template <typename T, int kVec>
__device__ __forceinline__ void store(T* p, int64_t element, const V<T, kVec>& v) {
  *reinterpret_cast<V<T, kVec>*>(p + element) = v;
}

template <typename T, int kVec>
__global__ void lltm_gates_kernel(
    const T* __restrict__ gates, const T* __restrict__ old_cell, T* __restrict__ new_h,
    T* __restrict__ new_cell, int64_t batch, int64_t state) {
  using A = acc_type<T>;
  const int64_t col = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * kVec;
  if (col >= state) {
    return;
  }
  const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
  for (int64_t r = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r < batch; r += row_stride) {
    const int64_t g = r * 3 * state + col;
    const int64_t s = r * state + col;
    const V<T, kVec> g0 = load<T, kVec>(gates, g);
    const V<T, kVec> g1 = load<T, kVec>(gates, g + state);
    const V<T, kVec> g2 = load<T, kVec>(gates, g + 2 * state);
    const V<T, kVec> c = load<T, kVec>(old_cell, s);
    V<T, kVec> h, nc;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const Forward<A> f = forward<A>(g0.val[j], g1.val[j], g2.val[j], c.val[j]);
      h.val[j] = static_cast<T>(f.new_h);
      nc.val[j] = static_cast<T>(f.new_cell);
    }
    store<T, kVec>(new_h, s, h);
    store<T, kVec>(new_cell, s, nc);
  }
}

template <typename T, int kVec>
__global__ void lltm_gates_backward_kernel(
    const T* __restrict__ grad_h, const T* __restrict__ grad_cell, const T* __restrict__ gates,
    const T* __restrict__ old_cell, T* __restrict__ d_gates, T* __restrict__ d_old_cell,
    int64_t batch, int64_t state) {
  using A = acc_type<T>;
  const int64_t col = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) * kVec;
  if (col >= state) {
    return;
  }
  const int64_t row_stride = int64_t{gridDim.y} * blockDim.y;
  for (int64_t r = int64_t{blockIdx.y} * blockDim.y + threadIdx.y; r < batch; r += row_stride) {
    const int64_t g = r * 3 * state + col;
    const int64_t s = r * state + col;
    const V<T, kVec> gh = load<T, kVec>(grad_h, s);
    const V<T, kVec> gc = load<T, kVec>(grad_cell, s);
    const V<T, kVec> g0 = load<T, kVec>(gates, g);
    const V<T, kVec> g1 = load<T, kVec>(gates, g + state);
    const V<T, kVec> g2 = load<T, kVec>(gates, g + 2 * state);
    const V<T, kVec> c = load<T, kVec>(old_cell, s);
    V<T, kVec> d0, d1, d2, dc;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const Backward<A> b = backward<A>(
          gh.val[j], gc.val[j], g0.val[j], g1.val[j], g2.val[j], c.val[j]);
      d0.val[j] = static_cast<T>(b.d_g0);
      d1.val[j] = static_cast<T>(b.d_g1);
      d2.val[j] = static_cast<T>(b.d_g2);
      dc.val[j] = static_cast<T>(b.d_old_cell);
    }
    store<T, kVec>(d_gates, g, d0);
    store<T, kVec>(d_gates, g + state, d1);
    store<T, kVec>(d_gates, g + 2 * state, d2);
    store<T, kVec>(d_old_cell, s, dc);
  }
}

} // namespace

std::tuple<Tensor, Tensor> lltm_gates_cuda(const Tensor& gates, const Tensor& old_cell) {
  check_args(gates, old_cell, "lltm_gates");
  const int32_t device = gates.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  ForwardTensors t(gates, old_cell);
  if (t.empty()) {
    return {t.new_h, t.new_cell};
  }
  const int64_t batch = t.batch, state = t.state;
  const cudaStream_t stream = cuda::current_stream(device, "lltm_gates");
  dispatch_float(t.gates.scalar_type(), "lltm_gates", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = t.gates.const_data_ptr<T>();
    const T* pc = t.old_cell.const_data_ptr<T>();
    T* ph = t.new_h.mutable_data_ptr<T>();
    T* pn = t.new_cell.mutable_data_ptr<T>();
    if (cuda::can_vectorize<T>(state, {pg, pc, ph, pn})) {
      constexpr int kVec = cuda::kVecSize<T>;
      const TileGrid tg = tile_grid(state / kVec, batch, device);
      lltm_gates_kernel<T, kVec><<<tg.grid, tg.block, 0, stream>>>(pg, pc, ph, pn, batch, state);
    } else {
      const TileGrid tg = tile_grid(state, batch, device);
      lltm_gates_kernel<T, 1><<<tg.grid, tg.block, 0, stream>>>(pg, pc, ph, pn, batch, state);
    }
    WHEELOPS_CHECK_LAUNCH("lltm_gates");
  });
  return {t.new_h, t.new_cell};
}

std::tuple<Tensor, Tensor> lltm_gates_backward_cuda(
    const Tensor& grad_h, const Tensor& grad_cell, const Tensor& gates, const Tensor& old_cell) {
  check_backward_args(grad_h, grad_cell, gates, old_cell);
  const int32_t device = gates.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  BackwardTensors t(grad_h, grad_cell, gates, old_cell);
  if (t.empty()) {
    return {t.d_gates, t.d_old_cell};
  }
  const int64_t batch = t.batch, state = t.state;
  const cudaStream_t stream = cuda::current_stream(device, "lltm_gates_backward");
  dispatch_float(t.gates.scalar_type(), "lltm_gates_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pgh = t.grad_h.const_data_ptr<T>();
    const T* pgc = t.grad_cell.const_data_ptr<T>();
    const T* pg = t.gates.const_data_ptr<T>();
    const T* pc = t.old_cell.const_data_ptr<T>();
    T* pdg = t.d_gates.mutable_data_ptr<T>();
    T* pdc = t.d_old_cell.mutable_data_ptr<T>();
    if (cuda::can_vectorize<T>(state, {pgh, pgc, pg, pc, pdg, pdc})) {
      constexpr int kVec = cuda::kVecSize<T>;
      const TileGrid tg = tile_grid(state / kVec, batch, device);
      lltm_gates_backward_kernel<T, kVec><<<tg.grid, tg.block, 0, stream>>>(
          pgh, pgc, pg, pc, pdg, pdc, batch, state);
    } else {
      const TileGrid tg = tile_grid(state, batch, device);
      lltm_gates_backward_kernel<T, 1><<<tg.grid, tg.block, 0, stream>>>(
          pgh, pgc, pg, pc, pdg, pdc, batch, state);
    }
    WHEELOPS_CHECK_LAUNCH("lltm_gates_backward");
  });
  return {t.d_gates, t.d_old_cell};
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("lltm_gates", TORCH_BOX(&lltm_gates_cuda));
  m.impl("lltm_gates_backward", TORCH_BOX(&lltm_gates_backward_cuda));
}

} // namespace wheelops::lltm
