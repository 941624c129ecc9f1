// normalize_volume: CUDA kernel.
//
// Pure streaming (2 bytes in, 4 bytes out per voxel): a thread reads 8 uint16
// with one 16-byte load and writes them as two 16-byte float4 stores, in a
// grid-stride loop with int64 indices (volumes over 2**31 voxels are fine). A
// scalar loop takes the last voxels and unaligned views; strided views are
// made contiguous first.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "normalize_volume.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/vectorized.cuh"

namespace wheelops {
namespace {

constexpr int kThreads = 256;
constexpr int kVoxelsPerVec = 8;

// Little-endian: the low half of each 32-bit word is the earlier voxel.
__device__ __forceinline__ float low_half(uint32_t w, float d) {
  return normalize_value(static_cast<uint16_t>(w & 0xffffu), d);
}

__device__ __forceinline__ float high_half(uint32_t w, float d) {
  return normalize_value(static_cast<uint16_t>(w >> 16), d);
}

template <bool kVector>
__global__ void normalize_volume_kernel(
    const uint16_t* __restrict__ in, float* __restrict__ out, int64_t n, float divisor) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if constexpr (kVector) {
    const int64_t vecs = n / kVoxelsPerVec;
    const uint4* in_vec = reinterpret_cast<const uint4*>(in);
    float4* out_vec = reinterpret_cast<float4*>(out);
    for (int64_t v = first; v < vecs; v += stride) {
      const uint4 w = in_vec[v];
      out_vec[2 * v] = make_float4(
          low_half(w.x, divisor), high_half(w.x, divisor), low_half(w.y, divisor),
          high_half(w.y, divisor));
      out_vec[2 * v + 1] = make_float4(
          low_half(w.z, divisor), high_half(w.z, divisor), low_half(w.w, divisor),
          high_half(w.w, divisor));
    }
    done = vecs * kVoxelsPerVec;
  }
  for (int64_t i = done + first; i < n; i += stride) {
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
