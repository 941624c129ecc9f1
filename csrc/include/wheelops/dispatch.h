// Maps a runtime dtype to the C++ element type and its accumulation type.
//
// One table for CPU and CUDA code: torch's header-only Half and BFloat16
// convert to float on the host and on the device alike.
#pragma once

#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include "wheelops/error.h"
#include <torch/headeronly/util/Half.h>

#include <type_traits>

namespace wheelops {

using Half = torch::headeronly::Half;
using BFloat16 = torch::headeronly::BFloat16;

// Reduced-precision inputs are computed in float32, float64 in float64.
template <typename T>
using acc_type = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) for the element type T of `dtype`.
template <typename Fn>
decltype(auto) dispatch_float(
    torch::headeronly::ScalarType dtype, const char* op, Fn&& fn) {
  using torch::headeronly::ScalarType;
  switch (dtype) {
    case ScalarType::Float:
      return fn(TypeTag<float>{});
    case ScalarType::Half:
      return fn(TypeTag<Half>{});
    case ScalarType::BFloat16:
      return fn(TypeTag<BFloat16>{});
    case ScalarType::Double:
      return fn(TypeTag<double>{});
    default:
      detail::throw_error(
          "wheelops.", op, ": unsupported dtype ", torch::headeronly::toString(dtype));
  }
}

} // namespace wheelops
