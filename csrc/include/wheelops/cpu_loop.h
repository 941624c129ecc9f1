// Parallel loops for the CPU kernels, on torch's own intra-op thread pool.
#pragma once

#include <torch/csrc/stable/ops.h>

#include <cstdint>

#include "wheelops/dispatch.h"

namespace wheelops::cpu {

// Elements per task: large enough that scheduling costs vanish next to the work.
constexpr int64_t kGrainSize = 32768;

// fn(begin, end) over [0, n). fn must not throw: the pool runs it behind a C ABI.
template <typename Fn>
void parallel_range(int64_t n, int64_t grain, const Fn& fn) {
  if (n <= 0) {
    return;
  }
  if (n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  torch::stable::parallel_for(0, n, grain, fn);
}

// out[i] = op(in[0][i], ...), computed in acc_type<T>, over n contiguous elements.
template <typename T, typename Op, typename... In>
void elementwise(T* out, int64_t n, Op op, const In*... in) {
  using A = acc_type<T>;
  parallel_range(n, kGrainSize, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = static_cast<T>(op(static_cast<A>(in[i])...));
    }
  });
}

} // namespace wheelops::cpu
