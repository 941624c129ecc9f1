// Argument checks, the host set-up and the elementwise gate math of the LLTM cell
// (wheelops::lltm_gates and its backward), shared by the CPU and CUDA kernels.
//
// gates = [old_h, input] @ weights.T + bias is [B, 3 S]: input gate, output
// gate and candidate pre-activations side by side. The GEMM stays in torch;
// everything after it is one pass over gates and old_cell.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include "wheelops/math.h"
#include "wheelops/tensor_checks.h"
#include "wheelops/tensors.h"

namespace wheelops::lltm {

inline void check_state(
    const Tensor& gates, const Tensor& t, const char* name, const char* op) {
  check_float_tensor(t, op, name);
  check_same_device(gates, "gates", t, name, op);
  check_same_dtype(gates, "gates", t, name, op);
  WHEELOPS_CHECK(
      t.dim() == 2 && t.size(0) == gates.size(0) && 3 * t.size(1) == gates.size(1),
      "wheelops.", op, ": argument '", name, "' must have shape [", gates.size(0), ", ",
      gates.size(1) / 3, "] ([batch, state_size] of 'gates' [batch, 3 * state_size]), got ",
      shape_string(t));
}

inline void check_args(const Tensor& gates, const Tensor& old_cell, const char* op) {
  check_float_tensor(gates, op, "gates");
  WHEELOPS_CHECK(
      gates.dim() == 2 && gates.size(1) % 3 == 0, "wheelops.", op,
      ": argument 'gates' must have shape [batch, 3 * state_size], got ", shape_string(gates));
  check_state(gates, old_cell, "old_cell", op);
}

inline void check_backward_args(
    const Tensor& grad_h, const Tensor& grad_cell, const Tensor& gates, const Tensor& old_cell) {
  constexpr const char* op = "lltm_gates_backward";
  check_args(gates, old_cell, op);
  check_state(gates, grad_h, "grad_h", op);
  check_state(gates, grad_cell, "grad_cell", op);
}

using math::exp_;
using math::expm1_;
using math::tanh_;

// exp of a non-positive argument only: 1 / (1 + exp(-x)) underflows to 0 below
// x = -88.7 in float32 (exp(-x) overflows), where the result is still a float
// (a subnormal down to -103); e / (1 + e) keeps it, one rounding per op either way.
template <typename A>
C10_HOST_DEVICE inline A sigmoid(A x) {
  const A e = exp_(x > A(0) ? -x : x);
  return (x > A(0) ? A(1) : e) / (A(1) + e);
}

// ELU with alpha = 1, as torch.nn.functional.elu.
template <typename A>
C10_HOST_DEVICE inline A elu(A x) {
  return x > A(0) ? x : expm1_(x);
}

// d elu(x) / dx, as the tutorial's d_elu: 1 above zero, exp(x) elsewhere.
template <typename A>
C10_HOST_DEVICE inline A elu_derivative(A x) {
  return x > A(0) ? A(1) : exp_(x);
}

template <typename A>
struct Forward {
  A new_h;
  A new_cell;
};

// g0, g1, g2: the input gate, output gate and candidate pre-activations.
template <typename A>
C10_HOST_DEVICE inline Forward<A> forward(A g0, A g1, A g2, A old_cell) {
  const A new_cell = old_cell + elu(g2) * sigmoid(g0);
  return {tanh_(new_cell) * sigmoid(g1), new_cell};
}

template <typename A>
struct Backward {
  A d_g0;
  A d_g1;
  A d_g2;
  A d_old_cell;
};

// Recomputes the forward from the saved gates and old_cell (cheaper than
// saving the activations: this pass is memory bound).
template <typename A>
C10_HOST_DEVICE inline Backward<A> backward(
    A grad_h, A grad_cell, A g0, A g1, A g2, A old_cell) {
  const A input_gate = sigmoid(g0);
  const A output_gate = sigmoid(g1);
  const A candidate = elu(g2);
  const A tanh_cell = tanh_(old_cell + candidate * input_gate);
  const A d_new_cell = grad_cell + grad_h * output_gate * (A(1) - tanh_cell * tanh_cell);
  return {
      d_new_cell * candidate * input_gate * (A(1) - input_gate),
      grad_h * tanh_cell * output_gate * (A(1) - output_gate),
      d_new_cell * input_gate * elu_derivative(g2),
      d_new_cell,
  };
}

// lltm_gates' tensors once its arguments are checked: the inputs contiguous, the
// outputs allocated like old_cell (on the current device: the CUDA kernel makes gates'
// device current first).
struct ForwardTensors {
  ForwardTensors(const Tensor& gates_in, const Tensor& old_cell_in)
      : gates(as_contiguous(gates_in)),
        old_cell(as_contiguous(old_cell_in)),
        new_h(allocate_like(old_cell)),
        new_cell(allocate_like(old_cell)),
        batch(old_cell.size(0)),
        state(old_cell.size(1)) {}
  bool empty() const {
    return batch == 0 || state == 0;
  }
  Tensor gates, old_cell, new_h, new_cell;
  int64_t batch, state;
};

// lltm_gates_backward's tensors, likewise: d_gates allocated like gates, d_old_cell
// like old_cell.
struct BackwardTensors {
  BackwardTensors(
      const Tensor& grad_h_in, const Tensor& grad_cell_in, const Tensor& gates_in,
      const Tensor& old_cell_in)
      : grad_h(as_contiguous(grad_h_in)),
        grad_cell(as_contiguous(grad_cell_in)),
        gates(as_contiguous(gates_in)),
        old_cell(as_contiguous(old_cell_in)),
        d_gates(allocate_like(gates)),
        d_old_cell(allocate_like(old_cell)),
        batch(old_cell.size(0)),
        state(old_cell.size(1)) {}
  bool empty() const {
    return batch == 0 || state == 0;
  }
  Tensor grad_h, grad_cell, gates, old_cell, d_gates, d_old_cell;
  int64_t batch, state;
};

} // namespace wheelops::lltm
