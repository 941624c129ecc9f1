// relu_scale(x, alpha) = max(x, 0) * alpha, fused: schema and CPU kernel.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "relu_scale.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/dispatch.h"
#include "wheelops/tensors.h"

namespace wheelops {

Tensor relu_scale_cpu(const Tensor& x, double alpha) {
  check_relu_scale_args(x);
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

Tensor relu_scale_backward_cpu(const Tensor& grad, const Tensor& x, double alpha) {
  check_relu_scale_backward_args(grad, x);
  const Tensor g_c = as_contiguous(grad);
  const Tensor x_c = as_contiguous(x);
  Tensor grad_x = allocate_like(x_c);
  dispatch_float(x_c.scalar_type(), "relu_scale_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    const A a = round_to<A>(alpha);
    cpu::elementwise(
        grad_x.mutable_data_ptr<T>(), x_c.numel(),
        [a](A g, A v) { return relu_scale_grad_value(g, v, a); }, g_c.const_data_ptr<T>(),
        x_c.const_data_ptr<T>());
  });
  return grad_x;
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("relu_scale(Tensor x, float alpha) -> Tensor");
  m.def("relu_scale_backward(Tensor grad, Tensor x, float alpha) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("relu_scale", TORCH_BOX(&relu_scale_cpu));
  m.impl("relu_scale_backward", TORCH_BOX(&relu_scale_backward_cpu));
}

} // namespace wheelops
