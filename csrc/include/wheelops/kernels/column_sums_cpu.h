// Deterministic column sums on CPU, shared by bias_gelu's and fused_linear_gelu's
// backward (grad_bias).
#pragma once

#include <cstdint>

#include "wheelops/cpu_loop.h"

namespace wheelops::cpu {

// Columns per task: each task owns its columns' sums, so they do not depend on the
// thread count.
constexpr int64_t kColumnBlock = 64;

// out[c] = the sum over r of value(r, c) (in A, rows in order) for a [rows, cols]
// matrix, value called once per element, row by row within each block of columns.
template <typename A, typename T, typename Value>
void blocked_column_sums(int64_t rows, int64_t cols, T* out, Value value) {
  const int64_t blocks = (cols + kColumnBlock - 1) / kColumnBlock;
  const int64_t per_block = rows * kColumnBlock;
  const int64_t grain = per_block > 0 ? kGrainSize / per_block + 1 : 1;
  parallel_range(blocks, grain, [=](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t c0 = blk * kColumnBlock;
      const int64_t c1 = c0 + kColumnBlock < cols ? c0 + kColumnBlock : cols;
      A sums[kColumnBlock] = {};
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = c0; c < c1; ++c) {
          sums[c - c0] += value(r, c);
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        out[c] = static_cast<T>(sums[c - c0]);
      }
    }
  });
}

} // namespace wheelops::cpu
