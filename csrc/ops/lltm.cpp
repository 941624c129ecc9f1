// The fused elementwise part of the LLTM cell (forward and backward):
// schemas and CPU kernels. The GEMM around it is torch's (src/wheelops/ops/lltm.py).
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <tuple>

#include "lltm.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/dispatch.h"
#include "wheelops/tensors.h"

namespace wheelops::lltm {
namespace {

// Row r of gates holds g0 | g1 | g2, each `state` long.
template <typename T>
void forward_rows(
    const T* gates, const T* old_cell, T* new_h, T* new_cell, int64_t batch, int64_t state) {
  using A = acc_type<T>;
  cpu::parallel_range(batch, cpu::kGrainSize / state + 1, [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* g = gates + r * 3 * state;
      for (int64_t s = r * state, c = 0; c < state; ++s, ++c) {
        const Forward<A> f = forward<A>(
            g[c], g[state + c], g[2 * state + c], static_cast<A>(old_cell[s]));
        new_h[s] = static_cast<T>(f.new_h);
        new_cell[s] = static_cast<T>(f.new_cell);
      }
    }
  });
}

template <typename T>
void backward_rows(
    const T* grad_h, const T* grad_cell, const T* gates, const T* old_cell, T* d_gates,
    T* d_old_cell, int64_t batch, int64_t state) {
  using A = acc_type<T>;
  cpu::parallel_range(batch, cpu::kGrainSize / state + 1, [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* g = gates + r * 3 * state;
      T* dg = d_gates + r * 3 * state;
      for (int64_t s = r * state, c = 0; c < state; ++s, ++c) {
        const Backward<A> b = backward<A>(
            grad_h[s], grad_cell[s], g[c], g[state + c], g[2 * state + c], old_cell[s]);
        dg[c] = static_cast<T>(b.d_g0);
        dg[state + c] = static_cast<T>(b.d_g1);
        dg[2 * state + c] = static_cast<T>(b.d_g2);
        d_old_cell[s] = static_cast<T>(b.d_old_cell);
      }
    }
  });
}

} // namespace

std::tuple<Tensor, Tensor> lltm_gates_cpu(const Tensor& gates, const Tensor& old_cell) {
  check_args(gates, old_cell, "lltm_gates");
  ForwardTensors t(gates, old_cell);
  if (t.empty()) {
    return {t.new_h, t.new_cell};
  }
  dispatch_float(t.gates.scalar_type(), "lltm_gates", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward_rows<T>(
        t.gates.const_data_ptr<T>(), t.old_cell.const_data_ptr<T>(),
        t.new_h.mutable_data_ptr<T>(), t.new_cell.mutable_data_ptr<T>(), t.batch, t.state);
  });
  return {t.new_h, t.new_cell};
}

std::tuple<Tensor, Tensor> lltm_gates_backward_cpu(
    const Tensor& grad_h, const Tensor& grad_cell, const Tensor& gates, const Tensor& old_cell) {
  check_backward_args(grad_h, grad_cell, gates, old_cell);
  BackwardTensors t(grad_h, grad_cell, gates, old_cell);
  if (t.empty()) {
    return {t.d_gates, t.d_old_cell};
  }
  dispatch_float(t.gates.scalar_type(), "lltm_gates_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_rows<T>(
        t.grad_h.const_data_ptr<T>(), t.grad_cell.const_data_ptr<T>(),
        t.gates.const_data_ptr<T>(), t.old_cell.const_data_ptr<T>(),
        t.d_gates.mutable_data_ptr<T>(), t.d_old_cell.mutable_data_ptr<T>(), t.batch, t.state);
  });
  return {t.d_gates, t.d_old_cell};
}

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("lltm_gates(Tensor gates, Tensor old_cell) -> (Tensor new_h, Tensor new_cell)");
  m.def(
      "lltm_gates_backward(Tensor grad_h, Tensor grad_cell, Tensor gates, Tensor old_cell)"
      " -> (Tensor d_gates, Tensor d_old_cell)");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("lltm_gates", TORCH_BOX(&lltm_gates_cpu));
  m.impl("lltm_gates_backward", TORCH_BOX(&lltm_gates_backward_cpu));
}

} // namespace wheelops::lltm
