// What every CUDA kernel launch needs: the caller's current stream, error
// checks with the op's name, and the device's size for grid shapes.
//
// The CUDA library links only torch's core libraries and the CUDA runtime
// (never libtorch_cuda), so it still loads, e.g. for diagnosis, where
// libtorch_cuda is absent. The current-stream shim lives in libtorch_cuda,
// which torch loads privately (RTLD_LOCAL); it is looked up in the already
// loaded library once and cached.
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include "wheelops/error.h"

#include <array>
#include <atomic>
#include <cstdint>

namespace wheelops::cuda {

#define WHEELOPS_CUDA_CHECK(expr, op)                                      \
  do {                                                                     \
    const cudaError_t wheelops_err_ = (expr);                              \
    WHEELOPS_CHECK(                                                       \
        wheelops_err_ == cudaSuccess, "wheelops.", op, ": CUDA error ",    \
        cudaGetErrorName(wheelops_err_), ": ",                             \
        cudaGetErrorString(wheelops_err_));                                \
  } while (0)

// Call right after a launch: reports a bad configuration as the op's error
// instead of leaving it for the next, unrelated CUDA call to trip over.
#define WHEELOPS_CHECK_LAUNCH(op) ::wheelops::cuda::check_launch(op)

// The Python guard refuses GPUs the build has no kernel for before any launch;
// this explains the same case for callers that bypass it (torch.ops.wheelops.*
// directly, or WHEELOPS_SKIP_GUARD=1) instead of CUDA's bare message.
inline void check_launch(const char* op) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaErrorNoKernelImageForDevice) {
    int device = -1, major = 0, minor = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    WHEELOPS_CHECK(
        false, "wheelops.", op, ": this wheelops build has no kernel image for cuda:",
        device, " (compute capability ", major, ".", minor,
        "). Run `python -m wheelops` to see the GPU architectures it holds and the "
        "command that installs a build for this GPU.");
  }
  WHEELOPS_CUDA_CHECK(err, op);
}

using CurrentStreamFn = decltype(&aoti_torch_get_current_cuda_stream);

inline CurrentStreamFn find_current_stream_fn() {
  void* lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) {
    return nullptr;
  }
  return reinterpret_cast<CurrentStreamFn>(
      dlsym(lib, "aoti_torch_get_current_cuda_stream"));
}

// The stream torch's caching allocator and the caller's work are ordered on.
inline cudaStream_t current_stream(int32_t device_index, const char* op) {
  static const CurrentStreamFn fn = find_current_stream_fn();
  WHEELOPS_CHECK(
      fn != nullptr, "wheelops.", op,
      ": CUDA kernels need a CUDA build of torch, and libtorch_cuda.so is "
      "not loaded in this process");
  void* stream = nullptr;
  WHEELOPS_CHECK(
      fn(device_index, &stream) == AOTI_TORCH_SUCCESS, "wheelops.", op,
      ": could not get the current CUDA stream of device ", device_index);
  return static_cast<cudaStream_t>(stream);
}

constexpr int kMaxDevices = 64;

// Cached per device: the attribute query is not free on the hot path.
inline int multiprocessor_count(int32_t device_index) {
  static std::array<std::atomic<int>, kMaxDevices> cache{};
  if (device_index < 0 || device_index >= kMaxDevices) {
    int count = 0;
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device_index);
    return count > 0 ? count : 1;
  }
  int count = cache[device_index].load(std::memory_order_relaxed);
  if (count == 0) {
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device_index);
    count = count > 0 ? count : 1;
    cache[device_index].store(count, std::memory_order_relaxed);
  }
  return count;
}

// major * 10 + minor (90: Hopper), cached per device as multiprocessor_count is.
inline int compute_capability(int32_t device_index) {
  static std::array<std::atomic<int>, kMaxDevices> cache{};
  const bool cached = device_index >= 0 && device_index < kMaxDevices;
  int capability = cached ? cache[device_index].load(std::memory_order_relaxed) : 0;
  if (capability == 0) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_index);
    capability = major * 10 + minor;
    if (cached) {
      cache[device_index].store(capability, std::memory_order_relaxed);
    }
  }
  return capability;
}

// Blocks for a grid-stride loop over `work_items`: enough to fill every SM
// several times over, never more than the work needs.
inline unsigned int grid_for(int64_t work_items, int threads, int32_t device_index) {
  const int64_t wanted = (work_items + threads - 1) / threads;
  const int64_t cap = int64_t{multiprocessor_count(device_index)} * 16;
  const int64_t blocks = wanted < cap ? wanted : cap;
  return static_cast<unsigned int>(blocks > 0 ? blocks : 1);
}

// Blocks for one pass over `work_items` (a block per `threads` items), for
// streaming kernels: a grid capped at a few waves, each block looping over
// several tiles, ran 1-4% below one tile per block on an H200 (4096 x 16384 add;
// within 2% either way on an H100). Capped at CUDA's grid limit; the kernels
// still loop past it.
inline unsigned int one_pass_grid(int64_t work_items, int threads) {
  const int64_t wanted = (work_items + threads - 1) / threads;
  const int64_t cap = (int64_t{1} << 31) - 1;
  const int64_t blocks = wanted < cap ? wanted : cap;
  return static_cast<unsigned int>(blocks > 0 ? blocks : 1);
}

} // namespace wheelops::cuda
