// Grid sizing from a kernel's real occupancy.
//
// A grid of "N blocks per SM" assumes N blocks fit at once; when registers or
// shared memory allow fewer, the grid runs as a full wave plus a partial one,
// and the partial wave costs nearly as long as a full one with a fraction of
// the bytes in flight. Persistent (grid-stride) kernels should launch exactly
// the blocks that are resident together. The occupancy query is cached per
// kernel and device, so the hot path pays for it once.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "wheelops/cuda_runtime.cuh"

namespace wheelops::cuda {

// One cache per kernel: declare it `static` next to the launch.
using OccupancyCache = std::array<std::atomic<int>, kMaxDevices>;

// Blocks of `threads` threads (and `shared_bytes` dynamic shared memory) of
// `kernel` that fit on one SM of `device` at once; at least 1.
template <typename Kernel>
int resident_blocks_per_sm(
    OccupancyCache& cache, Kernel kernel, int threads, size_t shared_bytes, int32_t device) {
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached) {
    const int hit = cache[device].load(std::memory_order_relaxed);
    if (hit > 0) {
      return hit;
    }
  }
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, shared_bytes) !=
      cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the launch check
    blocks = 1;
  }
  blocks = blocks > 0 ? blocks : 1;
  if (cached) {
    cache[device].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

// The same for a kernel whose launches vary in threads or shared memory (the norms'
// backward, sized from the row length): the answer to this thread's last question about
// `kKernel`, kept with what it was asked for, so a loop over one shape asks the driver
// once (~2-3 µs of host time a call on an H200's host) and a new shape asks again.
template <auto kKernel>
int resident_blocks_per_sm_of_shape(int threads, size_t shared_bytes, int32_t device) {
  struct Answer {
    int32_t device = -1;
    int threads = 0;
    size_t shared_bytes = 0;
    int blocks = 0;
  };
  thread_local Answer last;
  if (last.blocks > 0 && last.device == device && last.threads == threads &&
      last.shared_bytes == shared_bytes) {
    return last.blocks;
  }
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, threads, shared_bytes) !=
      cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the launch check
    blocks = 1;
  }
  blocks = blocks > 0 ? blocks : 1;
  last = {device, threads, shared_bytes, blocks};
  return blocks;
}

// Every block resident at once, one wave: `resident_blocks_per_sm` times the
// SM count, never more than `work_blocks` (the blocks the work could use).
template <typename Kernel>
unsigned int resident_grid(
    OccupancyCache& cache, Kernel kernel, int threads, size_t shared_bytes, int64_t work_blocks,
    int32_t device) {
  const int64_t cap = int64_t{multiprocessor_count(device)} *
                      resident_blocks_per_sm(cache, kernel, threads, shared_bytes, device);
  const int64_t blocks = work_blocks < cap ? work_blocks : cap;
  return static_cast<unsigned int>(blocks > 0 ? blocks : 1);
}

} // namespace wheelops::cuda
