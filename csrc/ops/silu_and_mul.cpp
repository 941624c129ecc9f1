// silu_and_mul(x) = silu(x[..., :d]) * x[..., d:] (SwiGLU) and its backward
// from the saved input: schemas and CPU kernels.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <vector>

#include "silu_and_mul.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/dispatch.h"
#include "wheelops/tensors.h"

namespace wheelops::silu_and_mul {
namespace {

int64_t row_grain(int64_t d) {
  return d > 0 ? cpu::kGrainSize / d + 1 : 1;
}

template <typename T>
void forward_rows(const T* x, T* out, Rows shape) {
  using A = acc_type<T>;
  const int64_t d = shape.d;
  cpu::parallel_range(shape.rows, row_grain(d), [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* gate = x + r * 2 * d;
      const T* up = gate + d;
      T* o = out + r * d;
      for (int64_t c = 0; c < d; ++c) {
        o[c] = static_cast<T>(forward(static_cast<A>(gate[c]), static_cast<A>(up[c])));
      }
    }
  });
}

template <typename T>
void backward_rows(const T* grad, const T* x, T* grad_x, Rows shape) {
  using A = acc_type<T>;
  const int64_t d = shape.d;
  cpu::parallel_range(shape.rows, row_grain(d), [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* g = grad + r * d;
      const T* gate = x + r * 2 * d;
      const T* up = gate + d;
      T* grad_gate = grad_x + r * 2 * d;
      T* grad_up = grad_gate + d;
      for (int64_t c = 0; c < d; ++c) {
        A ga, gb;
        backward(
            static_cast<A>(g[c]), static_cast<A>(gate[c]), static_cast<A>(up[c]), ga, gb);
        grad_gate[c] = static_cast<T>(ga);
        grad_up[c] = static_cast<T>(gb);
      }
    }
  });
}

Tensor silu_and_mul_cpu(const Tensor& x) {
  check_forward_args(x);
  const Tensor x_c = as_contiguous(x);
  Tensor out = allocate(x_c, output_shape(x_c));
  dispatch_float(x_c.scalar_type(), "silu_and_mul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward_rows<T>(x_c.const_data_ptr<T>(), out.mutable_data_ptr<T>(), rows_of(x_c));
  });
  return out;
}

Tensor silu_and_mul_backward_cpu(const Tensor& grad, const Tensor& x) {
  check_backward_args(grad, x);
  const Tensor g_c = as_contiguous(grad);
  const Tensor x_c = as_contiguous(x);
  Tensor grad_x = allocate_like(x_c);
  dispatch_float(x_c.scalar_type(), "silu_and_mul_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_rows<T>(
        g_c.const_data_ptr<T>(), x_c.const_data_ptr<T>(), grad_x.mutable_data_ptr<T>(),
        rows_of(x_c));
  });
  return grad_x;
}

} // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("silu_and_mul(Tensor x) -> Tensor");
  m.def("silu_and_mul_backward(Tensor grad, Tensor x) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("silu_and_mul", TORCH_BOX(&silu_and_mul_cpu));
  m.impl("silu_and_mul_backward", TORCH_BOX(&silu_and_mul_backward_cpu));
}

} // namespace wheelops::silu_and_mul
