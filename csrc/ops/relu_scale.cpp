// relu_scale(x, alpha) = max(x, 0) * alpha, fused: schemas and CPU kernels.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <tuple>

#include "relu_scale.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/dispatch.h"
#include "wheelops/tensors.h"

namespace wheelops::relu_scale {

Tensor relu_scale_cpu(const Tensor& x, double alpha) {
  check_args(x, "relu_scale");
  const Tensor x_c = as_contiguous(x);
  Tensor out = allocate_like(x_c);
  dispatch_float(x_c.scalar_type(), "relu_scale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    const A a = round_to<A>(alpha);
    cpu::elementwise(
        out.mutable_data_ptr<T>(), x_c.numel(), [a](A x) { return relu_scale_value(x, a); },
        x_c.const_data_ptr<T>());
  });
  return out;
}

std::tuple<Tensor, Tensor> relu_scale_with_mask_cpu(const Tensor& x, double alpha) {
  check_args(x, "relu_scale_with_mask");
  const Tensor x_c = as_contiguous(x);
  Tensor out = allocate_like(x_c);
  const int64_t n = x_c.numel();
  Tensor mask = allocate(x_c, {relu_scale_mask_bytes(n)}, ScalarType::Byte);
  dispatch_float(x_c.scalar_type(), "relu_scale_with_mask", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    const A a = round_to<A>(alpha);
    const T* px = x_c.const_data_ptr<T>();
    T* po = out.mutable_data_ptr<T>();
    uint8_t* pm = mask.mutable_data_ptr<uint8_t>();
    cpu::parallel_range(
        relu_scale_mask_bytes(n), cpu::kGrainSize / 8, [=](int64_t begin, int64_t end) {
          for (int64_t k = begin; k < end; ++k) {
            const int64_t first = k * 8;
            const int64_t last = first + 8 < n ? first + 8 : n;
            uint32_t bits = 0;
            for (int64_t i = first; i < last; ++i) {
              const A v = static_cast<A>(px[i]);
              po[i] = static_cast<T>(relu_scale_value(v, a));
              bits |= uint32_t{relu_scale_passes(v)} << (i - first);
            }
            pm[k] = static_cast<uint8_t>(bits);
          }
        });
  });
  return {out, mask};
}

Tensor relu_scale_backward_cpu(const Tensor& grad, const Tensor& mask, double alpha) {
  check_backward_args(grad, mask);
  const Tensor g_c = as_contiguous(grad);
  const Tensor m_c = as_contiguous(mask);
  Tensor grad_x = allocate_like(g_c);
  dispatch_float(g_c.scalar_type(), "relu_scale_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    const A a = round_to<A>(alpha);
    const T* pg = g_c.const_data_ptr<T>();
    const uint8_t* pm = m_c.const_data_ptr<uint8_t>();
    T* po = grad_x.mutable_data_ptr<T>();
    cpu::parallel_range(g_c.numel(), cpu::kGrainSize, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const bool passes = (pm[i / 8] >> (i % 8)) & 1;
        po[i] = static_cast<T>(relu_scale_grad_value(static_cast<A>(pg[i]), passes, a));
      }
    });
  });
  return grad_x;
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("relu_scale(Tensor x, float alpha) -> Tensor");
  m.def("relu_scale_with_mask(Tensor x, float alpha) -> (Tensor, Tensor)");
  m.def("relu_scale_backward(Tensor grad, Tensor mask, float alpha) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("relu_scale", TORCH_BOX(&relu_scale_cpu));
  m.impl("relu_scale_with_mask", TORCH_BOX(&relu_scale_with_mask_cpu));
  m.impl("relu_scale_backward", TORCH_BOX(&relu_scale_backward_cpu));
}

} // namespace wheelops::relu_scale
