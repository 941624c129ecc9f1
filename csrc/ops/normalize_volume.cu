// normalize_volume: CUDA kernel.
//
// Pure streaming (2 bytes in, 4 bytes out per voxel): a lane reads 8 uint16
// with one 16-byte load and writes two 16-byte float4 stores (the layout and
// its compile-time checks are in normalize_volume.h), int64 indices
// throughout (volumes over 2**31 voxels are fine). Each warp converts a tile
// of kChunksPerTile chunks and issues all their loads before any math, so a
// lane has 64 bytes of loads in flight (one 16-byte load per warp was not
// enough to cover HBM latency: 87% of copy bandwidth on an H200). One tile per
// warp, blocks sized to the volume (not a persistent grid-stride loop, whose
// warps got 15 or 16 chunks each: a tail). A scalar loop takes the last
// voxels and unaligned views; strided views are made contiguous first.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "normalize_volume.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops::normalize_volume {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpSize = layout::kWarpSize;
constexpr int kWarpsPerBlock = kThreads / kWarpSize;
constexpr int kChunksPerTile = 4;
constexpr int64_t kVoxelsPerTile = kChunksPerTile * layout::kVoxelsPerChunk;
// More than any volume that fits in memory needs; the loops stride past it.
constexpr int64_t kMaxBlocks = int64_t{1} << 30;
static_assert(kThreads % kWarpSize == 0, "the vector loop needs whole warps");

// Little-endian: the low half of each 32-bit word is the earlier voxel.
__device__ __forceinline__ float low_half(uint32_t w, float d) {
  return normalize_value(static_cast<uint16_t>(w & 0xffffu), d);
}

__device__ __forceinline__ float high_half(uint32_t w, float d) {
  return normalize_value(static_cast<uint16_t>(w >> 16), d);
}

// One chunk of 256 voxels from the warp's loads `w`: lane L writes voxels
// 4L..4L+3 and 128+4L..128+4L+3, so the lanes swap halves of their loads with
// shuffles first (writing each lane's own 8 voxels would make every store
// instruction touch half of each 32-byte sector, twice).
__device__ __forceinline__ void store_chunk(
    const uint4& w, float4* __restrict__ out_vec, int64_t chunk, int lane, float divisor) {
  const bool upper = (lane & 1) != 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int source = layout::shuffle_source(half, lane);
    const uint32_t x = __shfl_sync(0xffffffffu, w.x, source);
    const uint32_t y = __shfl_sync(0xffffffffu, w.y, source);
    const uint32_t z = __shfl_sync(0xffffffffu, w.z, source);
    const uint32_t v = __shfl_sync(0xffffffffu, w.w, source);
    const uint32_t a = upper ? z : x;
    const uint32_t b = upper ? v : y;
    out_vec[layout::store_index(chunk, half, lane)] = make_float4(
        low_half(a, divisor), high_half(a, divisor), low_half(b, divisor),
        high_half(b, divisor));
  }
}

// kVector: whole tiles by warps, then the rest voxel by voxel. The tile loop
// depends only on the warp, so all 32 lanes run the same iterations, as the
// full-mask shuffles need.
template <bool kVector>
__global__ void normalize_volume_kernel(
    const uint16_t* __restrict__ in, float* __restrict__ out, int64_t n, float divisor) {
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t threads = int64_t{gridDim.x} * blockDim.x;
  int64_t done = 0;
  if constexpr (kVector) {
    const int lane = threadIdx.x % kWarpSize;
    const int64_t tiles = n / kVoxelsPerTile;
    const uint4* __restrict__ in_vec = reinterpret_cast<const uint4*>(in);
    float4* __restrict__ out_vec = reinterpret_cast<float4*>(out);
    for (int64_t tile = thread / kWarpSize; tile < tiles; tile += threads / kWarpSize) {
      const int64_t first_chunk = tile * kChunksPerTile;
      uint4 w[kChunksPerTile];
#pragma unroll
      for (int k = 0; k < kChunksPerTile; ++k) {
        w[k] = in_vec[layout::load_index(first_chunk + k, lane)];
      }
#pragma unroll
      for (int k = 0; k < kChunksPerTile; ++k) {
        store_chunk(w[k], out_vec, first_chunk + k, lane, divisor);
      }
    }
    done = tiles * kVoxelsPerTile;
  }
  for (int64_t i = done + thread; i < n; i += threads) {
    out[i] = normalize_value(in[i], divisor);
  }
}

} // namespace

Tensor normalize_volume_cuda(const Tensor& vol, double max_value) {
  const float divisor = check_args(vol, max_value);
  const int32_t device = vol.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor v_c = as_contiguous(vol);
  Tensor out = allocate(v_c, v_c.sizes(), ScalarType::Float);
  const int64_t n = v_c.numel();
  if (n == 0) {
    return out;
  }
  const uint16_t* in = v_c.const_data_ptr<uint16_t>();
  float* o = out.mutable_data_ptr<float>();
  const cudaStream_t stream = cuda::current_stream(device, "normalize_volume");
  if (cuda::is_aligned_16(in) && cuda::is_aligned_16(o)) {
    // A block per kWarpsPerBlock tiles; at least one for the scalar rest.
    const int64_t tiles = n / kVoxelsPerTile;
    int64_t blocks = (tiles + kWarpsPerBlock - 1) / kWarpsPerBlock;
    blocks = blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks);
    normalize_volume_kernel<true>
        <<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(in, o, n, divisor);
  } else {
    const unsigned int blocks = cuda::grid_for(n, kThreads, device);
    normalize_volume_kernel<false><<<blocks, kThreads, 0, stream>>>(in, o, n, divisor);
  }
  WHEELOPS_CHECK_LAUNCH("normalize_volume");
  return out;
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("normalize_volume", TORCH_BOX(&normalize_volume_cuda));
}

} // namespace wheelops::normalize_volume
