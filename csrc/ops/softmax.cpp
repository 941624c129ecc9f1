// softmax(x, dim) and its backward from the saved output: schemas and CPU
// kernels. Each row is reduced by one thread in a fixed (pairwise) order, so
// results do not depend on the thread count.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <cmath>
#include <limits>

#include "softmax.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/dispatch.h"
#include "wheelops/tensors.h"

namespace wheelops::softmax {
namespace {

// NaN wins, as in torch.max, so a row holding NaN becomes all NaN.
template <typename A>
inline A max_nan(A a, A b) {
  return (a != a || a > b) ? a : b;
}

// Sum of term(c) over [begin, end), pairwise: the rounding error grows with
// log(n), not n, so float32 rows of 65536+ elements still sum accurately.
template <typename A, typename Term>
A pairwise_sum(int64_t begin, int64_t end, const Term& term) {
  constexpr int64_t kLeaf = 64;
  if (end - begin <= kLeaf) {
    A sum = A(0);
    for (int64_t c = begin; c < end; ++c) {
      sum += term(c);
    }
    return sum;
  }
  const int64_t mid = begin + (end - begin) / 2;
  return pairwise_sum<A>(begin, mid, term) + pairwise_sum<A>(mid, end, term);
}

int64_t row_grain(int64_t cols) {
  return cols > 0 ? cpu::kGrainSize / cols + 1 : 1;
}

template <typename T>
void forward_rows(const T* x, T* y, RowsCols shape) {
  using A = acc_type<T>;
  const int64_t cols = shape.cols;
  cpu::parallel_range(shape.rows, row_grain(cols), [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* in = x + r * cols;
      T* out = y + r * cols;
      A row_max = -std::numeric_limits<A>::infinity();
      for (int64_t c = 0; c < cols; ++c) {
        row_max = max_nan(row_max, static_cast<A>(in[c]));
      }
      const A sum = pairwise_sum<A>(
          0, cols, [&](int64_t c) { return std::exp(static_cast<A>(in[c]) - row_max); });
      const A inv = A(1) / sum;
      for (int64_t c = 0; c < cols; ++c) {
        out[c] = static_cast<T>(std::exp(static_cast<A>(in[c]) - row_max) * inv);
      }
    }
  });
}

template <typename T>
void backward_rows(const T* grad, const T* y, T* grad_x, RowsCols shape) {
  using A = acc_type<T>;
  const int64_t cols = shape.cols;
  cpu::parallel_range(shape.rows, row_grain(cols), [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t base = r * cols;
      const A dot = pairwise_sum<A>(0, cols, [&](int64_t c) {
        return static_cast<A>(grad[base + c]) * static_cast<A>(y[base + c]);
      });
      for (int64_t c = 0; c < cols; ++c) {
        const A yc = static_cast<A>(y[base + c]);
        grad_x[base + c] = static_cast<T>(yc * (static_cast<A>(grad[base + c]) - dot));
      }
    }
  });
}

Tensor softmax_cpu(const Tensor& x, int64_t dim) {
  const int64_t d = check_forward_args(x, dim);
  const Tensor x_rows = move_dim_last(x, d);
  Tensor out = allocate_like(x_rows);
  dispatch_float(x_rows.scalar_type(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward_rows<T>(x_rows.const_data_ptr<T>(), out.mutable_data_ptr<T>(), rows_cols(x_rows));
  });
  return move_dim_back(out, d);
}

Tensor softmax_backward_cpu(const Tensor& grad, const Tensor& out, int64_t dim) {
  const int64_t d = check_backward_args(grad, out, dim);
  const Tensor g_rows = move_dim_last(grad, d);
  const Tensor y_rows = move_dim_last(out, d);
  Tensor grad_x = allocate_like(y_rows);
  dispatch_float(y_rows.scalar_type(), "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_rows<T>(
        g_rows.const_data_ptr<T>(), y_rows.const_data_ptr<T>(), grad_x.mutable_data_ptr<T>(),
        rows_cols(y_rows));
  });
  return move_dim_back(grad_x, d);
}

} // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(wheelops, m) {
  m.def("softmax(Tensor x, int dim=-1) -> Tensor");
  m.def("softmax_backward(Tensor grad, Tensor out, int dim) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CPU, m) {
  m.impl("softmax", TORCH_BOX(&softmax_cpu));
  m.impl("softmax_backward", TORCH_BOX(&softmax_backward_cpu));
}

} // namespace wheelops::softmax
