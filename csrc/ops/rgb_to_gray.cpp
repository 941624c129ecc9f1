// rgb_to_gray(img): BT.601 luma of uint8 RGB images, correctly rounded:
// schema and CPU kernel.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "rgb_to_gray.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/tensors.h"

namespace wheelops::rgb_to_gray {

Tensor rgb_to_gray_cpu(const Tensor& img) {
  check_args(img);
  Tensor out = allocate(img, gray_shape(img));
  const int64_t d = img.dim();
  const int64_t images = d == 4 ? img.size(0) : 1;
  const int64_t image_stride = d == 4 ? img.stride(0) : 0;
  const int64_t h = img.size(d - 3), w = img.size(d - 2);
  const int64_t sh = img.stride(d - 3), sw = img.stride(d - 2), sc = img.stride(d - 1);
  if (out.numel() == 0) {
    return out;
  }
  // Any strides: reading through them costs less than a contiguous copy.
  const uint8_t* src = img.const_data_ptr<uint8_t>();
  uint8_t* dst = out.mutable_data_ptr<uint8_t>();
  const int64_t grain = cpu::kGrainSize / w + 1;
  cpu::parallel_range(images * h, grain, [=](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row / h, y = row - i * h;
      const uint8_t* in = src + i * image_stride + y * sh;
      uint8_t* o = dst + row * w;
      for (int64_t x = 0; x < w; ++x) {
        const uint8_t* px = in + x * sw;
        o[x] = bt601_luma(px[0], px[sc], px[2 * sc]);
      }
    }
  });
  return out;
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("rgb_to_gray(Tensor img) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("rgb_to_gray", TORCH_BOX(&rgb_to_gray_cpu));
}

} // namespace wheelops::rgb_to_gray
