// Argument checks, layout and the luma formula of wheelops::rgb_to_gray,
// shared by its CPU and CUDA kernels.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include <cstdint>
#include <vector>

#include "wheelops/tensor_checks.h"

namespace wheelops::rgb_to_gray {

inline void check_args(const Tensor& img) {
  WHEELOPS_CHECK(
      img.scalar_type() == ScalarType::Byte, "wheelops.rgb_to_gray: argument 'img' has dtype ",
      torch::headeronly::toString(img.scalar_type()), "; expected uint8");
  WHEELOPS_CHECK(
      (img.dim() == 3 || img.dim() == 4) && img.size(img.dim() - 1) == 3,
      "wheelops.rgb_to_gray: argument 'img' must have shape [H, W, 3] or [N, H, W, 3] "
      "(channels-last RGB), got ",
      shape_string(img));
}

// The output shape: img.shape[:-1].
inline std::vector<int64_t> gray_shape(const Tensor& img) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d + 1 < img.dim(); ++d) {
    shape.push_back(img.size(d));
  }
  return shape;
}

// BT.601 luma, correctly rounded: (299 R + 587 G + 114 B) / 1000 exactly, in
// integers, rounded half to even. The weights sum to 1000, so gray stays gray
// and the result never exceeds 255.
C10_HOST_DEVICE inline uint8_t bt601_luma(uint32_t r, uint32_t g, uint32_t b) {
  const uint32_t n = 299u * r + 587u * g + 114u * b;
  const uint32_t q = n / 1000u;
  const uint32_t rem = n - q * 1000u;
  const uint32_t up = (rem > 500u || (rem == 500u && (q & 1u) != 0u)) ? 1u : 0u;
  return static_cast<uint8_t>(q + up);
}

// img as `images` images of `pixels` pixels each: pixel p of image i, channel c
// is at i * image_stride + p * pixel_stride + c * channel_stride. Interleaved
// (HWC) images have pixel_stride 3 and channel_stride 1, planar ones (a
// permuted NCHW tensor) pixel_stride 1.
struct RgbLayout {
  int64_t images;
  int64_t pixels;
  int64_t image_stride;
  int64_t pixel_stride;
  int64_t channel_stride;
};

// The layout of img if its H and W dimensions (and, when they follow on, its
// images) walk memory with one stride; false for other strided views.
inline bool flat_rgb_layout(const Tensor& img, RgbLayout& layout) {
  const int64_t d = img.dim();
  const int64_t h = img.size(d - 3), w = img.size(d - 2);
  const int64_t sh = img.stride(d - 3), sw = img.stride(d - 2);
  int64_t pixel_stride = sw;
  if (w == 1) {
    pixel_stride = sh;
  } else if (h != 1 && sh != w * sw) {
    return false;
  }
  int64_t images = d == 4 ? img.size(0) : 1;
  int64_t image_stride = d == 4 ? img.stride(0) : 0;
  int64_t pixels = h * w;
  if (images == 1 || image_stride == pixels * pixel_stride) {
    // The images follow on: one long run of pixels.
    pixels *= images;
    images = 1;
    image_stride = 0;
  }
  layout = {images, pixels, image_stride, pixel_stride, img.stride(d - 1)};
  return true;
}

} // namespace wheelops::rgb_to_gray
