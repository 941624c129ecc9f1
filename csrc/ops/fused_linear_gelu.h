// Argument checks and shapes of wheelops::fused_linear_gelu and its backward, shared
// by the CPU and CUDA kernels.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "wheelops/tensor_checks.h"

namespace wheelops::fused_linear_gelu {

// input [*, K] viewed as [M, K]; weight [N, K]; output [*, N].
struct GemmShape {
  int64_t m;  // rows of input (product of its leading dimensions)
  int64_t n;  // out_features
  int64_t k;  // in_features
};

inline GemmShape gemm_shape(const Tensor& input, const Tensor& weight) {
  const RowsCols rc = rows_cols(input);
  return {rc.rows, weight.size(0), rc.cols};
}

// input.shape[:-1] + [n]
inline std::vector<int64_t> output_sizes(const Tensor& input, int64_t n) {
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d + 1 < input.dim(); ++d) {
    sizes.push_back(input.size(d));
  }
  sizes.push_back(n);
  return sizes;
}

inline void check_args(
    const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
    const char* op) {
  check_float_tensor(input, op, "input");
  check_float_tensor(weight, op, "weight");
  check_same_device(input, "input", weight, "weight", op);
  check_same_dtype(input, "input", weight, "weight", op);
  WHEELOPS_CHECK(
      input.dim() >= 1, "wheelops.", op, ": argument 'input' must have at least one dimension");
  const int64_t in_features = input.size(input.dim() - 1);
  WHEELOPS_CHECK(
      weight.dim() == 2 && weight.size(1) == in_features, "wheelops.", op,
      ": argument 'weight' must have shape [out_features, ", in_features,
      "] (in_features is the last dimension of 'input'), got ", shape_string(weight));
  if (bias.has_value()) {
    check_float_tensor(*bias, op, "bias");
    check_same_device(input, "input", *bias, "bias", op);
    check_same_dtype(input, "input", *bias, "bias", op);
    WHEELOPS_CHECK(
        bias->dim() == 1 && bias->size(0) == weight.size(0), "wheelops.", op,
        ": argument 'bias' must have shape [", weight.size(0),
        "] (out_features, the first dimension of 'weight'), got ", shape_string(*bias));
  }
}

inline bool same_sizes(const Tensor& t, const std::vector<int64_t>& sizes) {
  if (t.dim() != static_cast<int64_t>(sizes.size())) {
    return false;
  }
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) != sizes[d]) {
      return false;
    }
  }
  return true;
}

inline std::string sizes_string(const std::vector<int64_t>& sizes) {
  std::ostringstream out;
  out << "[";
  for (size_t d = 0; d < sizes.size(); ++d) {
    out << (d ? ", " : "") << sizes[d];
  }
  out << "]";
  return out.str();
}

inline void check_backward_args(
    const Tensor& grad, const Tensor& input, const Tensor& weight,
    const Tensor& pre_activation) {
  constexpr const char* op = "fused_linear_gelu_backward";
  check_args(input, weight, std::nullopt, op);
  const std::vector<int64_t> out_sizes = output_sizes(input, weight.size(0));
  const auto check_output_like = [&](const Tensor& t, const char* name) {
    check_float_tensor(t, op, name);
    check_same_device(input, "input", t, name, op);
    check_same_dtype(input, "input", t, name, op);
    WHEELOPS_CHECK(
        same_sizes(t, out_sizes), "wheelops.", op, ": argument '", name, "' must have shape ",
        sizes_string(out_sizes), " (the output's: input.shape[:-1] + [out_features]), got ",
        shape_string(t));
  };
  check_output_like(grad, "grad");
  check_output_like(pre_activation, "pre_activation");
}

} // namespace wheelops::fused_linear_gelu
