// Making inputs contiguous and allocating outputs, on the hot path of every op.
//
// torch::stable's contiguous, empty_like and (2.10) new_empty call the
// dispatcher by op name: a schema lookup plus a boxed call each, which on a
// small tensor costs as much as the whole op. These go through the C shim's
// direct entry points instead, and return an already contiguous input as is.
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/stableivalue_conversions.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "wheelops/error.h"

// torch >= 2.11's headers have a check that carries the failed call's own message
// (out of memory, say); torch 2.10's, which a dev build may compile against, do not.
#ifdef STABLE_TORCH_ERROR_CODE_CHECK
#define WHEELOPS_SHIM_CHECK(call) STABLE_TORCH_ERROR_CODE_CHECK(call)
#else
#define WHEELOPS_SHIM_CHECK(call) \
  WHEELOPS_CHECK((call) == AOTI_TORCH_SUCCESS, "wheelops: ", #call, " failed")
#endif

namespace wheelops {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// `t` itself when it is contiguous, else a contiguous copy.
inline Tensor as_contiguous(const Tensor& t) {
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

inline std::optional<Tensor> as_contiguous(const std::optional<Tensor>& t) {
  return t.has_value() ? std::optional<Tensor>(as_contiguous(*t)) : std::nullopt;
}

// An uninitialized contiguous tensor of `sizes` on `like`'s device, of `dtype`
// (default: `like`'s).
inline Tensor allocate(
    const Tensor& like, torch::headeronly::IntHeaderOnlyArrayRef sizes,
    std::optional<ScalarType> dtype = std::nullopt) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (int64_t d = ndim - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= sizes[d] > 1 ? sizes[d] : 1;
  }
  int32_t aoti_dtype = 0;
  if (dtype.has_value()) {
    aoti_dtype = torch::stable::detail::to<int32_t>(torch::stable::detail::from(*dtype));
  } else {
    WHEELOPS_SHIM_CHECK(aoti_torch_get_dtype(like.get(), &aoti_dtype));
  }
  int32_t device_type = 0;
  int32_t device_index = 0;
  WHEELOPS_SHIM_CHECK(aoti_torch_get_device_type(like.get(), &device_type));
  WHEELOPS_SHIM_CHECK(aoti_torch_get_device_index(like.get(), &device_index));
  AtenTensorHandle handle = nullptr;
  // Failing (out of memory, say), it throws with torch's own message.
  WHEELOPS_SHIM_CHECK(aoti_torch_empty_strided(
      ndim, sizes.data(), strides.data(), aoti_dtype, device_type, device_index, &handle));
  return Tensor(handle);
}

// An uninitialized contiguous tensor shaped, typed and placed like `like`.
inline Tensor allocate_like(const Tensor& like) {
  return allocate(like, like.sizes());
}

} // namespace wheelops
