// relu_scale(x, alpha) = max(x, 0) * alpha, fused: CUDA kernels.
//
// The forward without a gradient is the shared elementwise loop. With one, the
// forward also writes the bit mask (relu_scale.h) and the backward reads it:
// per thread kItems items of 8 elements (one mask byte each), the items of a
// warp contiguous, so element loads stay 16-byte vectors and a warp's mask
// bytes are one 32-byte sector. On an H200 the backward ran 1.26x (float32) and
// 1.40x (bf16) faster than reading x, and the forward with its mask as fast as
// without (4096 x 16384).
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include <tuple>

#include "relu_scale.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops::relu_scale {
namespace {

constexpr int kThreads = 256;
constexpr int kItems = 4;  // items (8 elements, one mask byte) per thread in flight

template <typename A>
struct ReluScaleOp {
  A alpha;
  __device__ A operator()(A x) const {
    return relu_scale_value(x, alpha);
  }
};

// Item `it` is elements [8 it, 8 it + 8): kVec-element vectors (kVec divides 8;
// 1 for unaligned tensors), all 8 in range for it < n / 8; the last, partial
// item (n % 8 elements) goes element by element.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads) relu_scale_with_mask_kernel(
    const T* __restrict__ x, T* __restrict__ out, uint8_t* __restrict__ mask, int64_t n,
    acc_type<T> alpha) {
  using A = acc_type<T>;
  constexpr int kPer = 8 / kVec;
  const int64_t full = n / 8;
  const int64_t items = relu_scale_mask_bytes(n);
  const int64_t tile = int64_t{blockDim.x} * kItems;
  for (int64_t base = int64_t{blockIdx.x} * tile + threadIdx.x; base < items;
       base += tile * gridDim.x) {
    cuda::Vec<T, kVec> v[kItems][kPer];
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const int64_t it = base + int64_t{u} * blockDim.x;
      if (it < full) {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
          v[u][p] = cuda::load_vec<T, kVec>(x, it * kPer + p);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const int64_t it = base + int64_t{u} * blockDim.x;
      uint32_t bits = 0;
      if (it < full) {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
          cuda::Vec<T, kVec> y;
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const A a = static_cast<A>(v[u][p].val[j]);
            y.val[j] = static_cast<T>(relu_scale_value(a, alpha));
            bits |= uint32_t{relu_scale_passes(a)} << (p * kVec + j);
          }
          cuda::store_vec<T, kVec>(out, it * kPer + p, y);
        }
        mask[it] = static_cast<uint8_t>(bits);
      } else if (it < items) {
        for (int64_t i = it * 8; i < n; ++i) {
          const A a = static_cast<A>(x[i]);
          out[i] = static_cast<T>(relu_scale_value(a, alpha));
          bits |= uint32_t{relu_scale_passes(a)} << (i - it * 8);
        }
        mask[it] = static_cast<uint8_t>(bits);
      }
    }
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads) relu_scale_backward_kernel(
    const T* __restrict__ grad, const uint8_t* __restrict__ mask, T* __restrict__ grad_x,
    int64_t n, acc_type<T> alpha) {
  using A = acc_type<T>;
  constexpr int kPer = 8 / kVec;
  const int64_t full = n / 8;
  const int64_t items = relu_scale_mask_bytes(n);
  const int64_t tile = int64_t{blockDim.x} * kItems;
  for (int64_t base = int64_t{blockIdx.x} * tile + threadIdx.x; base < items;
       base += tile * gridDim.x) {
    cuda::Vec<T, kVec> g[kItems][kPer];
    uint32_t m[kItems];
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const int64_t it = base + int64_t{u} * blockDim.x;
      if (it < full) {
        m[u] = mask[it];
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
          g[u][p] = cuda::load_vec<T, kVec>(grad, it * kPer + p);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const int64_t it = base + int64_t{u} * blockDim.x;
      if (it < full) {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
          cuda::Vec<T, kVec> y;
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const bool passes = (m[u] >> (p * kVec + j)) & 1;
            y.val[j] = static_cast<T>(
                relu_scale_grad_value(static_cast<A>(g[u][p].val[j]), passes, alpha));
          }
          cuda::store_vec<T, kVec>(grad_x, it * kPer + p, y);
        }
      } else if (it < items) {
        const uint32_t bits = mask[it];
        for (int64_t i = it * 8; i < n; ++i) {
          const bool passes = (bits >> (i - it * 8)) & 1;
          grad_x[i] = static_cast<T>(relu_scale_grad_value(static_cast<A>(grad[i]), passes, alpha));
        }
      }
    }
  }
}

unsigned int items_grid(int64_t n) {
  return cuda::one_pass_grid((relu_scale_mask_bytes(n) + kItems - 1) / kItems, kThreads);
}

} // namespace

Tensor relu_scale_cuda(const Tensor& x, double alpha) {
  check_args(x, "relu_scale");
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor x_c = as_contiguous(x);
  Tensor out = allocate_like(x_c);
  const cudaStream_t stream = cuda::current_stream(device, "relu_scale");
  dispatch_float(x_c.scalar_type(), "relu_scale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    cuda::Inputs<T, 1> in{{x_c.const_data_ptr<T>()}};
    cuda::launch_elementwise(
        out.mutable_data_ptr<T>(), in, x_c.numel(), ReluScaleOp<A>{round_to<A>(alpha)},
        stream, "relu_scale");
  });
  return out;
}

std::tuple<Tensor, Tensor> relu_scale_with_mask_cuda(const Tensor& x, double alpha) {
  constexpr const char* op = "relu_scale_with_mask";
  check_args(x, op);
  const int32_t device = x.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor x_c = as_contiguous(x);
  Tensor out = allocate_like(x_c);
  const int64_t n = x_c.numel();
  Tensor mask = allocate(x_c, {relu_scale_mask_bytes(n)}, ScalarType::Byte);
  if (n == 0) {
    return {out, mask};
  }
  const cudaStream_t stream = cuda::current_stream(device, op);
  dispatch_float(x_c.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    const T* px = x_c.const_data_ptr<T>();
    T* po = out.mutable_data_ptr<T>();
    uint8_t* pm = mask.mutable_data_ptr<uint8_t>();
    const A a = round_to<A>(alpha);
    if (cuda::is_aligned_16(px) && cuda::is_aligned_16(po)) {
      relu_scale_with_mask_kernel<T, cuda::kVecSize<T>>
          <<<items_grid(n), kThreads, 0, stream>>>(px, po, pm, n, a);
    } else {
      relu_scale_with_mask_kernel<T, 1><<<items_grid(n), kThreads, 0, stream>>>(px, po, pm, n, a);
    }
    WHEELOPS_CHECK_LAUNCH(op);
  });
  return {out, mask};
}

Tensor relu_scale_backward_cuda(const Tensor& grad, const Tensor& mask, double alpha) {
  constexpr const char* op = "relu_scale_backward";
  check_backward_args(grad, mask);
  const int32_t device = grad.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor g_c = as_contiguous(grad);
  const Tensor m_c = as_contiguous(mask);
  Tensor grad_x = allocate_like(g_c);
  const int64_t n = g_c.numel();
  if (n == 0) {
    return grad_x;
  }
  const cudaStream_t stream = cuda::current_stream(device, op);
  dispatch_float(g_c.scalar_type(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_type<T>;
    const T* pg = g_c.const_data_ptr<T>();
    const uint8_t* pm = m_c.const_data_ptr<uint8_t>();
    T* po = grad_x.mutable_data_ptr<T>();
    const A a = round_to<A>(alpha);
    if (cuda::is_aligned_16(pg) && cuda::is_aligned_16(po)) {
      relu_scale_backward_kernel<T, cuda::kVecSize<T>>
          <<<items_grid(n), kThreads, 0, stream>>>(pg, pm, po, n, a);
    } else {
      relu_scale_backward_kernel<T, 1><<<items_grid(n), kThreads, 0, stream>>>(pg, pm, po, n, a);
    }
    WHEELOPS_CHECK_LAUNCH(op);
  });
  return grad_x;
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("relu_scale", TORCH_BOX(&relu_scale_cuda));
  m.impl("relu_scale_with_mask", TORCH_BOX(&relu_scale_with_mask_cuda));
  m.impl("relu_scale_backward", TORCH_BOX(&relu_scale_backward_cuda));
}

} // namespace wheelops::relu_scale
