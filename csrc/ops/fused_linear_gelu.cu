// fused_linear_gelu forward and backward: cuBLASLt GEMMs with fused epilogues.
//
// Row-major Y[M, N] = X[M, K] @ W[N, K]^T is, column-major, Y^T[N, M] = W^T... so
// cuBLASLt computes D (N x M, ld N) = op(A = W, transposed) @ op(B = X): m = N, n = M,
// k = K, and the bias (length N) runs along D's rows, as its epilogues want.
//
// Forward: which path runs is a pure rule, fused_linear_gelu_path.h (tested on the CPU;
// each path and the reasons for it are described there): on sm_90 with the sm_90a kernels,
// the erf forward is one CUTLASS GEMM with the GELU in its epilogue (writing the
// pre-activation too where it is kept, in_features up to 1024); tanh (16-bit)
// is one cuBLASLt GEMM with its GELU epilogue; otherwise cuBLASLt's BIAS epilogue (or a
// plain GEMM and our bias kernel) writes the pre-activation and one GELU pass follows.
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
#include "fused_linear_gelu_path.h"
#if defined(WHEELOPS_SM90A_KERNELS)
#include "fused_linear_gelu_sm90a.h"
#endif
#include "wheelops/cublaslt.cuh"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/kernels/gelu_16bit.cuh"
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

template <typename T, gelu::Approximate kMode>
struct GeluOp {
  template <typename A>
  __device__ A operator()(A u) const {
    return gelu::forward_of<T, kMode>(u);
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

template <typename T>
constexpr Precision kPrecision = kSixteenBit<T>              ? Precision::kSixteenBit
                                 : std::is_same_v<T, double> ? Precision::kFloat64
                                                             : Precision::kFloat32;

#if defined(WHEELOPS_SM90A_KERNELS)
constexpr bool kSm90aKernels = true;
#else
constexpr bool kSm90aKernels = false;
#endif

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
  const ForwardFacts facts{kPrecision<T>,
                           mode == gelu::Approximate::kTanh,
                           pb != nullptr,
                           pp != nullptr,
                           kSm90aKernels,
                           cuda::compute_capability(device),
                           s.n,
                           s.k,
                           cuda::all_aligned_16({px, pw, pb, po, pp})};
  ForwardPath path = choose_forward_path(facts);
  if (path == ForwardPath::kCutlassErfGelu) {
#if defined(WHEELOPS_SM90A_KERNELS)
    if constexpr (kSixteenBit<T>) {
      const sm90a::Problem problem{
          std::is_same_v<T, Half> ? sm90a::Dtype::kHalf
                                  : sm90a::Dtype::kBFloat16,
          px, pw, pb, po, pp, s.m, s.n, s.k, device, cuda::multiprocessor_count(device)};
      if (sm90a::run(problem, stream)) {
        WHEELOPS_CHECK_LAUNCH(kOp);
        return;
      }
    }
#endif
    path = next_forward_path(path, facts);
  }
  if (path == ForwardPath::kGeluEpilogue) {
    const cublasLtEpilogue_t epilogue = pp != nullptr
        ? (pb != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
        : (pb != nullptr ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU);
    if (cublaslt::try_matmul(forward_gemm<T>(s, allow_tf32, epilogue), {pw, px, po, pb, pp},
                             x, device, stream, kOp)) {
      return;
    }
    path = next_forward_path(path, facts);
  }
  // The pre-activation, then the GELU over it.
  T* ph = pp != nullptr ? pp : po;
  bool bias_added = pb == nullptr;
  if (path == ForwardPath::kZeroK) {
    WHEELOPS_CUDA_CHECK(cudaMemsetAsync(ph, 0, sizeof(T) * s.m * s.n, stream), kOp);
  }
  if (path == ForwardPath::kBiasEpilogueThenGelu) {
    bias_added = cublaslt::try_matmul(
        forward_gemm<T>(s, allow_tf32, CUBLASLT_EPILOGUE_BIAS), {pw, px, ph, pb, nullptr}, x,
        device, stream, kOp);
    if (!bias_added) {
      path = next_forward_path(path, facts);
    }
  }
  if (path == ForwardPath::kGemmThenGelu) {
    cublaslt::matmul(forward_gemm<T>(s, allow_tf32, CUBLASLT_EPILOGUE_DEFAULT),
                     {pw, px, ph, nullptr, nullptr}, x, device, stream, kOp);
  }
  if (!bias_added) {
    add_bias_kernel<T><<<cuda::grid_for(s.m * s.n, kThreads, device), kThreads, 0, stream>>>(
        ph, pb, s.m, s.n);
    WHEELOPS_CHECK_LAUNCH(kOp);
  }
  gelu::dispatch_mode(mode, [&](auto m) {
    cuda::launch_elementwise<T, 1>(
        po, cuda::Inputs<T, 1>{{ph}}, s.m * s.n, GeluOp<T, decltype(m)::value>{}, stream, kOp);
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
