// rgb_to_gray: CUDA kernel.
//
// Pure streaming (3 bytes in, 1 byte out per pixel), so the whole game is wide
// memory accesses: a thread converts 16 pixels per step, with three 16-byte
// loads (interleaved RGB, or one from each plane of a planar view) and one
// 16-byte store. Unaligned views and the last pixels of each image take a
// scalar loop; other strided views are made contiguous first.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "rgb_to_gray.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops::rgb_to_gray {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;
constexpr int kPixelsPerVec = 16;

// Byte j (0..47) of three 16-byte words; j is a compile-time constant after
// unrolling, so this is one bit-field extract.
__device__ __forceinline__ uint32_t byte_at(const uint32_t (&w)[12], int j) {
  return (w[j >> 2] >> ((j & 3) * 8)) & 0xffu;
}

__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t* w) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
}

// 16 pixels from in[0..47] (interleaved) or in[0..15] of each plane (planar).
template <bool kPlanar>
__device__ __forceinline__ uint4 convert16(const uint8_t* in, int64_t channel_stride) {
  uint32_t w[12];
  if constexpr (kPlanar) {
    load_words(in, w);
    load_words(in + channel_stride, w + 4);
    load_words(in + 2 * channel_stride, w + 8);
  } else {
    load_words(in, w);
    load_words(in + 16, w + 4);
    load_words(in + 32, w + 8);
  }
  uint32_t out[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int k = 0; k < kPixelsPerVec; ++k) {
    const int r = kPlanar ? k : 3 * k;
    const int g = kPlanar ? 16 + k : 3 * k + 1;
    const int b = kPlanar ? 32 + k : 3 * k + 2;
    const uint32_t y = bt601_luma(byte_at(w, r), byte_at(w, g), byte_at(w, b));
    out[k >> 2] |= y << ((k & 3) * 8);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// Image i's pixels go to out[i * pixels, (i + 1) * pixels). blockIdx.y walks
// the images, blockIdx.x the pixels of one image.
template <bool kPlanar, bool kVector>
__global__ void rgb_to_gray_kernel(
    const uint8_t* __restrict__ in, uint8_t* __restrict__ out, RgbLayout layout) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (int64_t image = blockIdx.y; image < layout.images; image += gridDim.y) {
    const uint8_t* src = in + image * layout.image_stride;
    uint8_t* dst = out + image * layout.pixels;
    int64_t done = 0;
    if constexpr (kVector) {
      const int64_t vecs = layout.pixels / kPixelsPerVec;
      const int64_t vec_bytes = kPixelsPerVec * layout.pixel_stride;  // 48 or 16
      for (int64_t v = first; v < vecs; v += stride) {
        reinterpret_cast<uint4*>(dst)[v] =
            convert16<kPlanar>(src + v * vec_bytes, layout.channel_stride);
      }
      done = vecs * kPixelsPerVec;
    }
    for (int64_t p = done + first; p < layout.pixels; p += stride) {
      const uint8_t* px = src + p * layout.pixel_stride;
      dst[p] = bt601_luma(px[0], px[layout.channel_stride], px[2 * layout.channel_stride]);
    }
  }
}

// 16-byte accesses need every image's input (and planes) and output to start
// on a 16-byte boundary.
bool can_vectorize(const RgbLayout& l, const uint8_t* in, const uint8_t* out, bool planar) {
  if (!cuda::is_aligned_16(in) || !cuda::is_aligned_16(out)) {
    return false;
  }
  if (planar && l.channel_stride % 16 != 0) {
    return false;
  }
  return l.images == 1 || (l.image_stride % 16 == 0 && l.pixels % kPixelsPerVec == 0);
}

template <bool kPlanar, bool kVector>
void launch(const uint8_t* in, uint8_t* out, const RgbLayout& l, int32_t device,
            cudaStream_t stream) {
  const int64_t items = kVector ? (l.pixels + kPixelsPerVec - 1) / kPixelsPerVec : l.pixels;
  const int64_t grid_y = l.images < kMaxGridY ? l.images : kMaxGridY;
  const int64_t wanted = int64_t{cuda::multiprocessor_count(device)} * 16;
  const int64_t per_image = (wanted + grid_y - 1) / grid_y;
  int64_t grid_x = (items + kThreads - 1) / kThreads;
  grid_x = grid_x < per_image ? grid_x : per_image;
  grid_x = grid_x > 0 ? grid_x : 1;
  const dim3 grid(static_cast<unsigned int>(grid_x), static_cast<unsigned int>(grid_y));
  rgb_to_gray_kernel<kPlanar, kVector><<<grid, kThreads, 0, stream>>>(in, out, l);
  WHEELOPS_CHECK_LAUNCH("rgb_to_gray");
}

} // namespace

Tensor rgb_to_gray_cuda(const Tensor& img) {
  check_args(img);
  const int32_t device = img.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  Tensor out = allocate(img, gray_shape(img));
  if (out.numel() == 0) {
    return out;
  }
  Tensor src = img;
  RgbLayout layout{};
  if (!flat_rgb_layout(src, layout)) {
    src = as_contiguous(img);
    flat_rgb_layout(src, layout);
  }
  const bool planar = layout.pixel_stride == 1;
  const uint8_t* in = src.const_data_ptr<uint8_t>();
  uint8_t* o = out.mutable_data_ptr<uint8_t>();
  const bool vec = (planar || (layout.pixel_stride == 3 && layout.channel_stride == 1)) &&
      can_vectorize(layout, in, o, planar);
  const cudaStream_t stream = cuda::current_stream(device, "rgb_to_gray");
  if (!vec) {
    launch<false, false>(in, o, layout, device, stream);
  } else if (planar) {
    launch<true, true>(in, o, layout, device, stream);
  } else {
    launch<false, true>(in, o, layout, device, stream);
  }
  return out;
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("rgb_to_gray", TORCH_BOX(&rgb_to_gray_cuda));
}

} // namespace wheelops::rgb_to_gray
