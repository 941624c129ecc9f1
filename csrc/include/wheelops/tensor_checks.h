// Argument checks shared by every op's CPU and CUDA entry points.
//
// The Python API validates first and raises TypeError/ValueError; these checks
// are the second line for callers that go straight to torch.ops.wheelops.*, so
// a bad call is always a Python RuntimeError that names the op and argument,
// never a crash or an out-of-bounds read.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include "wheelops/error.h"

#include <cstdint>
#include <sstream>
#include <string>

namespace wheelops {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

inline std::string shape_string(const Tensor& t) {
  std::ostringstream out;
  out << "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    out << (d ? ", " : "") << t.size(d);
  }
  out << "]";
  return out.str();
}

inline bool is_supported_float(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Half ||
      t == ScalarType::BFloat16 || t == ScalarType::Double;
}

inline void check_float_tensor(const Tensor& t, const char* op, const char* arg) {
  WHEELOPS_CHECK(
      is_supported_float(t.scalar_type()),
      "wheelops.", op, ": argument '", arg, "' has dtype ",
      torch::headeronly::toString(t.scalar_type()),
      "; expected float32, float16, bfloat16 or float64");
}

inline void check_same_dtype(
    const Tensor& a, const char* a_name, const Tensor& b, const char* b_name,
    const char* op) {
  WHEELOPS_CHECK(
      a.scalar_type() == b.scalar_type(),
      "wheelops.", op, ": arguments '", a_name, "' and '", b_name,
      "' must have the same dtype (got ",
      torch::headeronly::toString(a.scalar_type()), " and ",
      torch::headeronly::toString(b.scalar_type()), ")");
}

inline void check_same_device(
    const Tensor& a, const char* a_name, const Tensor& b, const char* b_name,
    const char* op) {
  const bool same = a.is_cuda() == b.is_cuda() &&
      (!a.is_cuda() || a.get_device_index() == b.get_device_index());
  WHEELOPS_CHECK(
      same, "wheelops.", op, ": arguments '", a_name, "' and '", b_name,
      "' must be on the same device");
}

inline void check_same_shape(
    const Tensor& a, const char* a_name, const Tensor& b, const char* b_name,
    const char* op) {
  bool same = a.dim() == b.dim();
  for (int64_t d = 0; same && d < a.dim(); ++d) {
    same = a.size(d) == b.size(d);
  }
  WHEELOPS_CHECK(
      same, "wheelops.", op, ": arguments '", a_name, "' and '", b_name,
      "' must have the same shape (got ", shape_string(a), " and ",
      shape_string(b), "); wheelops does not broadcast");
}

// t viewed as [rows, cols] with cols its last dimension (a 0-dim tensor is one
// row of one).
struct RowsCols {
  int64_t rows;
  int64_t cols;
};

inline RowsCols rows_cols(const Tensor& t) {
  const int64_t cols = t.dim() > 0 ? t.size(t.dim() - 1) : 1;
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) {
    rows *= t.size(d);
  }
  return {rows, cols};
}

} // namespace wheelops
