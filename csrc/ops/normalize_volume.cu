// normalize_volume: CUDA kernel.
//
// Pure streaming (2 bytes in, 4 bytes out per voxel): a thread reads 8 uint16
// with one 16-byte load and writes two 16-byte float4 stores, warps walking
// the volume in a grid-stride loop with int64 indices (volumes over 2**31
// voxels are fine). A scalar loop takes the last voxels and unaligned views;
// strided views are made contiguous first.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "normalize_volume.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/vectorized.cuh"

namespace wheelops {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;
constexpr int kVoxelsPerVec = 8;  // one 16-byte load
constexpr int64_t kVoxelsPerChunk = kWarpSize * kVoxelsPerVec;
static_assert(kThreads % kWarpSize == 0, "the vector loop needs whole warps");

// Little-endian: the low half of each 32-bit word is the earlier voxel.
__device__ __forceinline__ float low_half(uint32_t w, float d) {
  return normalize_value(static_cast<uint16_t>(w & 0xffffu), d);
}

__device__ __forceinline__ float high_half(uint32_t w, float d) {
  return normalize_value(static_cast<uint16_t>(w >> 16), d);
}

// With kVector, each warp converts chunks of 256 voxels: every lane reads 8
// voxels with one 16-byte load (a coalesced 512-byte warp load) and writes two
// float4 (two coalesced 512-byte warp stores). Lane L's stores cover voxels
// 4L..4L+3 and 128+4L..128+4L+3 of the chunk, so the lanes swap halves of
// their loads with shuffles first: writing each lane's own 8 voxels instead
// would make every store instruction touch half of 32-byte sectors, twice.
template <bool kVector>
__global__ void normalize_volume_kernel(
    const uint16_t* __restrict__ in, float* __restrict__ out, int64_t n, float divisor) {
  const int64_t thread = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const int64_t threads = int64_t{gridDim.x} * blockDim.x;
  int64_t done = 0;
  if constexpr (kVector) {
    // blockDim.x is a multiple of 32: every warp is full and runs the same
    // number of iterations, as the full-mask shuffles need.
    const int lane = threadIdx.x % kWarpSize;
    const int64_t chunks = n / kVoxelsPerChunk;
    const uint4* in_vec = reinterpret_cast<const uint4*>(in);
    float4* out_vec = reinterpret_cast<float4*>(out);
    for (int64_t chunk = thread / kWarpSize; chunk < chunks; chunk += threads / kWarpSize) {
      const uint4 w = in_vec[chunk * kWarpSize + lane];
      const bool upper = (lane & 1) != 0;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int source = 16 * j + lane / 2;
        const uint32_t x = __shfl_sync(0xffffffffu, w.x, source);
        const uint32_t y = __shfl_sync(0xffffffffu, w.y, source);
        const uint32_t z = __shfl_sync(0xffffffffu, w.z, source);
        const uint32_t v = __shfl_sync(0xffffffffu, w.w, source);
        const uint32_t a = upper ? z : x;
        const uint32_t b = upper ? v : y;
        out_vec[chunk * 2 * kWarpSize + j * kWarpSize + lane] = make_float4(
            low_half(a, divisor), high_half(a, divisor), low_half(b, divisor),
            high_half(b, divisor));
      }
    }
    done = chunks * kVoxelsPerChunk;
  }
  for (int64_t i = done + thread; i < n; i += threads) {
    out[i] = normalize_value(in[i], divisor);
  }
}

} // namespace

Tensor normalize_volume_cuda(const Tensor& vol, double max_value) {
  const float divisor = check_normalize_volume_args(vol, max_value);
  const int32_t device = vol.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor v_c = torch::stable::contiguous(vol);
  Tensor out = torch::stable::new_empty(v_c, v_c.sizes(), ScalarType::Float);
  const int64_t n = v_c.numel();
  if (n == 0) {
    return out;
  }
  const uint16_t* in = v_c.const_data_ptr<uint16_t>();
  float* o = out.mutable_data_ptr<float>();
  const cudaStream_t stream = cuda::current_stream(device, "normalize_volume");
  if (cuda::is_aligned_16(in) && cuda::is_aligned_16(o)) {
    const unsigned int blocks = cuda::grid_for(n / kVoxelsPerVec + 1, kThreads, device);
    normalize_volume_kernel<true><<<blocks, kThreads, 0, stream>>>(in, o, n, divisor);
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

} // namespace wheelops
