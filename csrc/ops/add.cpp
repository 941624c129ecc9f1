// add(a, b) = a + b: schema and CPU kernel. Inputs of any strides are made
// contiguous; the output is contiguous.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "add.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/dispatch.h"
#include "wheelops/tensors.h"

namespace wheelops::add {

Tensor add_cpu(const Tensor& a, const Tensor& b) {
  check_args(a, b);
  const Tensor a_c = as_contiguous(a);
  const Tensor b_c = as_contiguous(b);
  Tensor out = allocate_like(a_c);
  dispatch_float(a_c.scalar_type(), "add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cpu::elementwise(
        out.mutable_data_ptr<T>(), a_c.numel(), [](auto x, auto y) { return x + y; },
        a_c.const_data_ptr<T>(), b_c.const_data_ptr<T>());
  });
  return out;
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("add(Tensor a, Tensor b) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("add", TORCH_BOX(&add_cpu));
}

} // namespace wheelops::add
