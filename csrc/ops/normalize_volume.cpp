// normalize_volume(vol, max_value) = float32(vol) / float32(max_value) for
// uint16 volumes: schema and CPU kernel.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "normalize_volume.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/tensors.h"

namespace wheelops::normalize_volume {

Tensor normalize_volume_cpu(const Tensor& vol, double max_value) {
  const float divisor = check_args(vol, max_value);
  const Tensor v_c = as_contiguous(vol);
  Tensor out = allocate(v_c, v_c.sizes(), ScalarType::Float);
  const uint16_t* in = v_c.const_data_ptr<uint16_t>();
  float* o = out.mutable_data_ptr<float>();
  cpu::parallel_range(v_c.numel(), cpu::kGrainSize, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      o[i] = normalize_value(in[i], divisor);
    }
  });
  return out;
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("normalize_volume(Tensor vol, float max_value) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("normalize_volume", TORCH_BOX(&normalize_volume_cpu));
}

} // namespace wheelops::normalize_volume
