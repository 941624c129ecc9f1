// CPU kernels of layer_norm (kCentered) and rms_norm (!kCentered).
//
// Rows run in parallel; every sum is accumulated in float64 and the statistics
// are rounded once to the stats dtype. The weight/bias gradients are column
// sums: each task owns a block of columns and walks all rows in order, so the
// result does not depend on the thread count (bitwise deterministic).
#pragma once

#include <torch/csrc/stable/ops.h>

#include <cmath>
#include <optional>
#include <tuple>

#include "wheelops/kernels/norm.h"
#include "wheelops/cpu_loop.h"
#include "wheelops/dispatch.h"
#include "wheelops/tensors.h"

namespace wheelops::norm::cpu_impl {

constexpr int64_t kColumnBlock = 64;

inline int64_t row_grain(int64_t cols) {
  return cols > 0 ? wheelops::cpu::kGrainSize / cols + 1 : wheelops::cpu::kGrainSize;
}

// The row's mean as shift + offset, with its first value as the shift and
// offset = mean(x - shift): centred values are (x - shift) - offset, so a
// constant row centres to exactly 0 (and normalizes to 0) and a large mean with
// a small spread loses nothing to cancellation.
struct ShiftedMean {
  double shift = 0.0;
  double offset = 0.0;

  double mean() const { return shift + offset; }
  double centred(double x) const { return (x - shift) - offset; }
};

// Sums over a row in blocks of kSumBlock, then over the blocks: the rounding
// error grows with kSumBlock + cols / kSumBlock terms, not cols (eager PyTorch's
// cascade sums do as well on long rows). add(c, acc) adds column c's terms.
constexpr int64_t kSumBlock = 64;

template <typename Acc, typename Add>
Acc blocked_sum(int64_t cols, Add add) {
  Acc total{};
  for (int64_t c0 = 0; c0 < cols; c0 += kSumBlock) {
    const int64_t c1 = c0 + kSumBlock < cols ? c0 + kSumBlock : cols;
    Acc block{};
    for (int64_t c = c0; c < c1; ++c) {
      add(c, block);
    }
    total += block;
  }
  return total;
}

// Two sums at once, for blocked_sum.
struct SumPair {
  double first = 0.0;
  double second = 0.0;

  SumPair& operator+=(const SumPair& other) {
    first += other.first;
    second += other.second;
    return *this;
  }
};

template <typename T>
ShiftedMean shifted_mean(const T* xr, int64_t cols) {
  if (cols == 0) {
    return {};
  }
  const double shift = static_cast<double>(xr[0]);
  const double sum = blocked_sum<double>(
      cols, [&](int64_t c, double& acc) { acc += static_cast<double>(xr[c]) - shift; });
  return {shift, sum / static_cast<double>(cols)};
}

// S: the stats type (float, or double for double).
template <typename T, bool kCentered>
void forward_rows(
    const T* x, const T* w, const T* b, T* out, acc_type<T>* mean, acc_type<T>* rstd,
    RowsCols shape, double eps) {
  using S = acc_type<T>;
  const int64_t cols = shape.cols;
  wheelops::cpu::parallel_range(shape.rows, row_grain(cols), [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * cols;
      T* outr = out + r * cols;
      ShiftedMean mu;  // rms_norm: 0 + 0
      if constexpr (kCentered) {
        mu = shifted_mean(xr, cols);
      }
      // first: sum of d^2, second: sum of d, over the centred values d.
      const SumPair sums = blocked_sum<SumPair>(cols, [&](int64_t c, SumPair& acc) {
        const double d = mu.centred(static_cast<double>(xr[c]));
        acc.first += d * d;
        acc.second += d;
      });
      double sq = sums.first;
      const double sum_d = sums.second;
      if (kCentered && cols > 0) {
        // The corrected two-pass algorithm: the first pass's rounding, measured
        // by sum(d), is removed from the offset and the variance.
        const double correction = sum_d / static_cast<double>(cols);
        mu.offset += correction;
        sq -= sum_d * correction;
      }
      const double var = cols > 0 ? sq / static_cast<double>(cols) : 0.0;
      const double rs = 1.0 / std::sqrt(var + eps);
      for (int64_t c = 0; c < cols; ++c) {
        double y = mu.centred(static_cast<double>(xr[c])) * rs;
        if (w != nullptr) {
          y *= static_cast<double>(w[c]);
        }
        if (b != nullptr) {
          y += static_cast<double>(b[c]);
        }
        outr[c] = static_cast<T>(y);
      }
      if (rstd != nullptr) {  // null: the inference op saves no statistics
        if constexpr (kCentered) {
          mean[r] = static_cast<S>(mu.mean());
        }
        rstd[r] = static_cast<S>(rs);
      }
    }
  });
}

// grad_x = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)); rms_norm drops mean(g*w).
template <typename T, bool kCentered>
void backward_grad_x(
    const T* grad, const T* x, const acc_type<T>* mean, const acc_type<T>* rstd, const T* w,
    T* grad_x, RowsCols shape) {
  const int64_t cols = shape.cols;
  wheelops::cpu::parallel_range(shape.rows, row_grain(cols), [=](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t base = r * cols;
      const double mu = kCentered ? static_cast<double>(mean[r]) : 0.0;
      const double rs = static_cast<double>(rstd[r]);
      double dot = 0.0;  // sum of g*w*xhat
      double sum = 0.0;  // sum of g*w
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (static_cast<double>(x[base + c]) - mu) * rs;
        double gw = static_cast<double>(grad[base + c]);
        if (w != nullptr) {
          gw *= static_cast<double>(w[c]);
        }
        dot += gw * xhat;
        sum += gw;
      }
      const double inv_cols = 1.0 / static_cast<double>(cols);
      const double mean_gw = kCentered ? sum * inv_cols : 0.0;
      const double mean_dot = dot * inv_cols;
      for (int64_t c = 0; c < cols; ++c) {
        const double xhat = (static_cast<double>(x[base + c]) - mu) * rs;
        double gw = static_cast<double>(grad[base + c]);
        if (w != nullptr) {
          gw *= static_cast<double>(w[c]);
        }
        grad_x[base + c] = static_cast<T>(rs * (gw - mean_gw - xhat * mean_dot));
      }
    }
  });
}

// grad_w = sum over rows of g * xhat, grad_b = sum over rows of g (either may be null).
template <typename T, bool kCentered>
void backward_columns(
    const T* grad, const T* x, const acc_type<T>* mean, const acc_type<T>* rstd, T* grad_w,
    T* grad_b, RowsCols shape) {
  const int64_t blocks = (shape.cols + kColumnBlock - 1) / kColumnBlock;
  const int64_t per_block = shape.rows * kColumnBlock;
  const int64_t grain = per_block > 0 ? wheelops::cpu::kGrainSize / per_block + 1 : 1;
  wheelops::cpu::parallel_range(blocks, grain, [=](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t c0 = blk * kColumnBlock;
      const int64_t c1 = c0 + kColumnBlock < shape.cols ? c0 + kColumnBlock : shape.cols;
      double sum_w[kColumnBlock] = {};
      double sum_b[kColumnBlock] = {};
      for (int64_t r = 0; r < shape.rows; ++r) {
        const int64_t base = r * shape.cols;
        const double mu = kCentered ? static_cast<double>(mean[r]) : 0.0;
        const double rs = static_cast<double>(rstd[r]);
        for (int64_t c = c0; c < c1; ++c) {
          const double g = static_cast<double>(grad[base + c]);
          sum_w[c - c0] += g * (static_cast<double>(x[base + c]) - mu) * rs;
          sum_b[c - c0] += g;
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        if (grad_w != nullptr) {
          grad_w[c] = static_cast<T>(sum_w[c - c0]);
        }
        if (grad_b != nullptr) {
          grad_b[c] = static_cast<T>(sum_b[c - c0]);
        }
      }
    }
  });
}

// The forward, with the statistics the backward needs (`stats`) or without (the
// inference ops).
template <bool kCentered>
Forward forward(
    const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
    double eps, bool stats, const char* op) {
  Forward f = prepare_forward<kCentered>(x, weight, bias, eps, stats, op);
  dispatch_float(f.x.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using S = acc_type<T>;
    forward_rows<T, kCentered>(
        f.x.const_data_ptr<T>(), data_or_null<T>(f.weight), data_or_null<T>(f.bias),
        f.out.mutable_data_ptr<T>(), kCentered ? mutable_data_or_null<S>(f.mean) : nullptr,
        mutable_data_or_null<S>(f.rstd), f.shape, eps);
  });
  return f;
}

template <bool kCentered>
std::tuple<std::optional<Tensor>, std::optional<Tensor>, std::optional<Tensor>> backward(
    const Tensor& grad, const Tensor& x, const std::optional<Tensor>& mean, const Tensor& rstd,
    const std::optional<Tensor>& weight, bool x_grad, bool weight_grad, bool bias_grad,
    const char* op) {
  Backward b =
      prepare_backward(grad, x, mean, rstd, weight, x_grad, weight_grad, bias_grad, op);
  dispatch_float(b.x.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using S = acc_type<T>;
    const S* pm = kCentered ? b.mean->template const_data_ptr<S>() : nullptr;
    const S* pr = b.rstd.const_data_ptr<S>();
    if (x_grad) {
      backward_grad_x<T, kCentered>(
          b.grad.const_data_ptr<T>(), b.x.const_data_ptr<T>(), pm, pr, data_or_null<T>(b.weight),
          b.grad_x->template mutable_data_ptr<T>(), b.shape);
    }
    if (weight_grad || bias_grad) {
      backward_columns<T, kCentered>(
          b.grad.const_data_ptr<T>(), b.x.const_data_ptr<T>(), pm, pr,
          mutable_data_or_null<T>(b.grad_weight), mutable_data_or_null<T>(b.grad_bias), b.shape);
    }
  });
  return {b.grad_x, b.grad_weight, b.grad_bias};
}

} // namespace wheelops::norm::cpu_impl
