// add(a, b) = a + b: CUDA kernel (128-bit vectorized, scalar tail).
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>

#include "add.h"
#include "wheelops/cuda_runtime.cuh"
#include "wheelops/dispatch.h"
#include "wheelops/vectorized.cuh"
#include "wheelops/tensors.h"

namespace wheelops::add {
namespace {

struct AddOp {
  template <typename A>
  __device__ A operator()(A x, A y) const {
    return x + y;
  }
};

} // namespace

Tensor add_cuda(const Tensor& a, const Tensor& b) {
  check_args(a, b);
  const int32_t device = a.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  const Tensor a_c = as_contiguous(a);
  const Tensor b_c = as_contiguous(b);
  Tensor out = allocate_like(a_c);
  const cudaStream_t stream = cuda::current_stream(device, "add");
  dispatch_float(a_c.scalar_type(), "add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cuda::Inputs<T, 2> in{{a_c.const_data_ptr<T>(), b_c.const_data_ptr<T>()}};
    cuda::launch_elementwise(
        out.mutable_data_ptr<T>(), in, a_c.numel(), AddOp{}, stream, "add");
  });
  return out;
}

STABLE_TORCH_LIBRARY_IMPL(wheelops, CUDA, m) {
  m.impl("add", TORCH_BOX(&add_cuda));
}

} // namespace wheelops::add
