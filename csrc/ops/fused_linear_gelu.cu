// fused_linear_gelu forward and backward: cuBLASLt GEMMs with fused epilogues.
//
// Row-major Y[M, N] = X[M, K] @ W[N, K]^T is, column-major, Y^T[N, M] = W^T... so
// cuBLASLt computes D (N x M, ld N) = op(A = W, transposed) @ op(B = X): m = N, n = M,
// k = K, and the bias (length N) runs along D's rows, as its epilogues want.
//
// Forward:
//   none (erf), 16-bit, with a bias, the pre-activation not kept (no gradient asked), on an
//         sm_90 GPU (where the library links the sm_90a kernels): one CUTLASS GEMM whose
//         epilogue adds the bias and applies the exact GELU in float32 before rounding
//         (fused_linear_gelu_sm90a.cu; where it is kept, the path below is as fast).
//   tanh (16-bit): one GEMM whose epilogue adds the bias and applies cuBLASLt's GELU (the tanh
//         form) in float32 before rounding: GELU_BIAS, or GELU_AUX_BIAS writing the
//         pre-activation for the backward too.
//   none (erf): cuBLASLt has no erf GELU epilogue. The GEMM's BIAS epilogue writes the
//         pre-activation rounded to the dtype (exactly what F.linear returns), then one
//         vectorized erf-GELU pass (in place when the pre-activation is not kept): as
//         exact as F.gelu(F.linear(...)), about as fast.
//   float64, out_features or in_features not a multiple of 8, an operand not 16-byte
//         aligned, or K = 0: a plain GEMM, then the
//         bias and the GELU in kernels of our own.
// Backward: one pass d_pre = grad * gelu'(pre) that also sums grad_bias (deterministic,
// two stages: the GELU family's backward, wheelops/kernels/gelu_backward.cu), then two
// plain GEMMs (grad_input = d_pre @ W, grad_weight = d_pre^T @ X).
// cuBLASLt's DGELU_BGRAD epilogue applies gelu' to a GEMM's output; here the incoming
// gradient is an input, not a GEMM's output, so it has nothing to fuse into.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "fused_linear_gelu.h"
#if defined(WHEELOPS_SM90A_KERNELS)
#include "fused_linear_gelu_sm90a.h"
#endif
#include "wheelops/cublaslt.cuh"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/kernels/gelu.h"
#include "wheelops/kernels/gelu_backward.h"
#include "wheelops/tensors.h"
#include "wheelops/vectorized.cuh"

namespace wheelops::fused_linear_gelu {
namespace {

constexpr const char* kOp = "fused_linear_gelu";
constexpr const char* kBackwardOp = "fused_linear_gelu_backward";
constexpr int kThreads = 256;

template <typename T>
struct CudaType;
template <>
struct CudaType<float> {
  static constexpr cudaDataType_t value = CUDA_R_32F;
};
template <>
struct CudaType<double> {
  static constexpr cudaDataType_t value = CUDA_R_64F;
};
template <>
struct CudaType<Half> {
  static constexpr cudaDataType_t value = CUDA_R_16F;
};
template <>
struct CudaType<BFloat16> {
  static constexpr cudaDataType_t value = CUDA_R_16BF;
};

// F.linear's rule: float32 uses TF32 only where allowed; 16-bit inputs accumulate in
// float32; float64 in float64.
template <typename T>
cublasComputeType_t compute_type(bool allow_tf32) {
  if constexpr (std::is_same_v<T, double>) {
    return CUBLAS_COMPUTE_64F;
  } else if constexpr (std::is_same_v<T, float>) {
    return allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  } else {
    return CUBLAS_COMPUTE_32F;
  }
}

template <gelu::Approximate kMode>
struct GeluOp {
  template <typename A>
  __device__ A operator()(A u) const {
    return gelu::forward<kMode>(u);
  }
};

// h[r, c] += bias[c] (the rare paths whose GEMM could not add it).
template <typename T>
__global__ void add_bias_kernel(T* __restrict__ h, const T* __restrict__ bias, int64_t rows,
                                int64_t cols) {
  using A = acc_type<T>;
  const int64_t n = rows * cols;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    h[i] = static_cast<T>(static_cast<A>(h[i]) + static_cast<A>(bias[i % cols]));
  }
}

// D (N x M column-major) = W @ X^T as cuBLASLt sees it: Y[M, N] row-major.
template <typename T>
cublaslt::Gemm forward_gemm(GemmShape s, bool allow_tf32, cublasLtEpilogue_t epilogue) {
  return {CudaType<T>::value, compute_type<T>(allow_tf32), true, false, s.n, s.m, s.k,
          s.k, s.k, s.n, epilogue, s.n};
}

template <typename T>
constexpr bool kSixteenBit = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Where cuBLASLt's bias and GELU epilogues are used. On an H100 (cuBLASLt 13.1) the BIAS
// and GELU_BIAS epilogues gave wrong elements (about one a row, off by up to 30 bf16 ulps)
// when out_features was not a multiple of 8 or an operand was not 16-byte aligned:
// there the GEMM runs plain and our kernels add the bias. Not for float64 (no epilogues).
template <typename T>
bool epilogue_fits(GemmShape s, std::initializer_list<const void*> pointers) {
  if constexpr (std::is_same_v<T, double>) {
    return false;
  } else {
    bool aligned = s.n % 8 == 0 && s.k % 8 == 0;
    for (const void* p : pointers) {
      aligned = aligned && (p == nullptr || cuda::is_aligned_16(p));
    }
    return aligned;
  }
}

template <typename T>
void forward(
    const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, gelu::Approximate mode,
    bool allow_tf32, Tensor& out, std::optional<Tensor> pre, GemmShape s, int32_t device,
    cudaStream_t stream) {
  const T* px = x.const_data_ptr<T>();
  const T* pw = w.const_data_ptr<T>();
  const T* pb = bias ? bias->const_data_ptr<T>() : nullptr;
  T* po = out.mutable_data_ptr<T>();
  T* pp = pre ? pre->mutable_data_ptr<T>() : nullptr;
  const bool fits = s.k > 0 && epilogue_fits<T>(s, {px, pw, pb, po, pp});
  // cuBLASLt's GELU is the tanh form, evaluated with an error of up to 38.5 float32 ulps
  // of 1 + |u| (measured, H100): far below a 16-bit result's rounding, far above
  // F.gelu's in float32, so float32 takes the exact path below (as fast: its GEMM
  // dominates, and the GELU_BIAS kernels were slower than BIAS ones there).
#if defined(WHEELOPS_SM90A_KERNELS)
  if constexpr (kSixteenBit<T>) {
    if (mode == gelu::Approximate::kNone && pb != nullptr && pp == nullptr &&
        cuda::compute_capability(device) == 90) {
      const sm90a::Problem problem{
          std::is_same_v<T, Half> ? sm90a::Dtype::kHalf
                                  : sm90a::Dtype::kBFloat16,
          px, pw, pb, po, s.m, s.n, s.k, device, cuda::multiprocessor_count(device)};
      if (sm90a::run(problem, stream)) {
        WHEELOPS_CHECK_LAUNCH(kOp);
        return;
      }
    }
  }
#endif
  if (mode == gelu::Approximate::kTanh && kSixteenBit<T> && fits) {
    const cublasLtEpilogue_t epilogue = pp != nullptr
        ? (pb != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
        : (pb != nullptr ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
    if (cublaslt::try_matmul(forward_gemm<T>(s, allow_tf32, epilogue), {pw, px, po, pb, pp},
                             x, device, stream, kOp)) {
      return;
    }
  }
  // The pre-activation, then the GELU over it.
  T* ph = pp != nullptr ? pp : po;
  bool bias_added = pb == nullptr;
  if (s.k == 0) {
    WHEELOPS_CUDA_CHECK(cudaMemsetAsync(ph, 0, sizeof(T) * s.m * s.n, stream), kOp);
  } else {
    if (!bias_added && fits) {
      bias_added = cublaslt::try_matmul(
          forward_gemm<T>(s, allow_tf32, CUBLASLT_EPILOGUE_BIAS), {pw, px, ph, pb, nullptr}, x,
          device, stream, kOp);
    }
    if (!bias_added || pb == nullptr) {
      cublaslt::matmul(forward_gemm<T>(s, allow_tf32, CUBLASLT_EPILOGUE_DEFAULT),
                       {pw, px, ph, nullptr, nullptr}, x, device, stream, kOp);
    }
  }
  if (!bias_added) {
    add_bias_kernel<T><<<cuda::grid_for(s.m * s.n, kThreads, device), kThreads, 0, stream>>>(
        ph, pb, s.m, s.n);
    WHEELOPS_CHECK_LAUNCH(kOp);
  }
  gelu::dispatch_mode(mode, [&](auto m) {
    cuda::launch_elementwise<T, 1>(
        po, cuda::Inputs<T, 1>{{ph}}, s.m * s.n, GeluOp<decltype(m)::value>{}, stream, kOp);
  });
}

} // namespace

std::tuple<Tensor, Tensor> fused_linear_gelu_cuda(
    const Tensor& input, const Tensor& weight, std::optional<Tensor> bias,
    std::string approximate, bool allow_tf32, bool keep_pre_activation) {
  check_args(input, weight, bias, kOp);
  const gelu::Approximate mode = gelu::parse_approximate(approximate, kOp);
  const int32_t device = input.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const GemmShape s = gemm_shape(input, weight);
  const std::vector<int64_t> out_sizes = output_sizes(input, s.n);
  Tensor out = allocate(input, out_sizes);
  Tensor pre = allocate(input, keep_pre_activation ? out_sizes : std::vector<int64_t>{0});
  if (s.m == 0 || s.n == 0) {
    return {out, pre};
  }
  const Tensor x = as_contiguous(input);
  const Tensor w = as_contiguous(weight);
  const std::optional<Tensor> b = as_contiguous(bias);
  const cudaStream_t stream = cuda::current_stream(device, kOp);
  dispatch_float(input.scalar_type(), kOp, [&](auto tag) {
    using T = typename decltype(tag)::type;
    forward<T>(x, w, b, mode, allow_tf32, out,
               keep_pre_activation ? std::optional<Tensor>(pre) : std::nullopt, s, device,
               stream);
  });
  return {out, pre};
}

std::tuple<std::optional<Tensor>, std::optional<Tensor>, std::optional<Tensor>>
fused_linear_gelu_backward_cuda(
    const Tensor& grad, const Tensor& input, const Tensor& weight, const Tensor& pre_activation,
    std::string approximate, bool allow_tf32, bool input_grad, bool weight_grad,
    bool bias_grad) {
  check_backward_args(grad, input, weight, pre_activation);
  const gelu::Approximate mode = gelu::parse_approximate(approximate, kBackwardOp);
  const int32_t device = input.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const GemmShape s = gemm_shape(input, weight);
  std::optional<Tensor> grad_input, grad_weight, grad_bias;
  if (input_grad) {
    grad_input = allocate(input, input.sizes());
  }
  if (weight_grad) {
    grad_weight = allocate(input, weight.sizes());
  }
  if (bias_grad) {
    grad_bias = allocate(input, {s.n});
  }
  const cudaStream_t stream = cuda::current_stream(device, kBackwardOp);
  const Tensor g_c = as_contiguous(grad);
  const Tensor p_c = as_contiguous(pre_activation);
  const Tensor x = as_contiguous(input);
  const Tensor w = as_contiguous(weight);
  Tensor d_pre = allocate(input, {s.m, s.n});
  // d_pre and grad_bias: the GELU backward with no bias (pre already holds it).
  gelu::backward_into(g_c, p_c, std::nullopt, d_pre, grad_bias, mode, kBackwardOp);
  dispatch_float(input.scalar_type(), kBackwardOp, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const size_t elem = sizeof(T);
    const T* pd = d_pre.const_data_ptr<T>();
    const cublasComputeType_t compute = compute_type<T>(allow_tf32);
    if (input_grad && s.m * s.k > 0) {
      T* pgi = grad_input->mutable_data_ptr<T>();
      if (s.n == 0) {
        WHEELOPS_CUDA_CHECK(cudaMemsetAsync(pgi, 0, elem * s.m * s.k, stream), kBackwardOp);
      } else {
        // grad_input^T (K x M) = W^T-as-stored (K x N, ld K) @ d_pre^T-as-stored (N x M)
        cublaslt::matmul({CudaType<T>::value, compute, false, false, s.k, s.m, s.n, s.k, s.n,
                          s.k, CUBLASLT_EPILOGUE_DEFAULT, 0},
                         {w.const_data_ptr<T>(), pd, pgi, nullptr, nullptr}, x, device, stream,
                         kBackwardOp);
      }
    }
    if (weight_grad && s.n * s.k > 0) {
      T* pgw = grad_weight->mutable_data_ptr<T>();
      if (s.m == 0) {
        WHEELOPS_CUDA_CHECK(cudaMemsetAsync(pgw, 0, elem * s.n * s.k, stream), kBackwardOp);
      } else {
        // grad_weight^T (K x N) = X-as-stored (K x M, ld K) @ (d_pre-as-stored (N x M))^T
        cublaslt::matmul({CudaType<T>::value, compute, false, true, s.k, s.n, s.m, s.k, s.n,
                          s.k, CUBLASLT_EPILOGUE_DEFAULT, 0},
                         {x.const_data_ptr<T>(), pd, pgw, nullptr, nullptr}, x, device, stream,
                         kBackwardOp);
      }
    }
  });
  return {grad_input, grad_weight, grad_bias};
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("fused_linear_gelu", TORCH_BOX(&fused_linear_gelu_cuda));
  m.impl("fused_linear_gelu_backward", TORCH_BOX(&fused_linear_gelu_backward_cuda));
}

} // namespace wheelops::fused_linear_gelu
