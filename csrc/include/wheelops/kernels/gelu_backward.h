// The fused GELU backward on CUDA (gelu_backward.cu), shared by bias_gelu and
// fused_linear_gelu.
#pragma once

#include <optional>

#include "wheelops/kernels/gelu.h"
#include "wheelops/tensors.h"

namespace wheelops::gelu {

// grad_x = grad * gelu'(x + bias) and grad_bias = its column sums, deterministic, for
// contiguous [rows, cols] tensors of x's dtype on x's device, on the current stream; bias
// and grad_bias may be absent.
void backward_into(
    const Tensor& grad, const Tensor& x, const std::optional<Tensor>& bias, Tensor& grad_x,
    std::optional<Tensor>& grad_bias, Approximate mode, const char* op);

} // namespace wheelops::gelu
