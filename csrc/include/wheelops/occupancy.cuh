// Grid sizing from a kernel's real occupancy.
//
// A grid of "N blocks per SM" assumes N blocks fit at once; when registers or
// shared memory allow fewer, the grid runs as a full wave plus a partial one,
// and the partial wave costs nearly as long as a full one with a fraction of
// the bytes in flight. Persistent (grid-stride) kernels should launch exactly
// the blocks that are resident together.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "wheelops/cuda_runtime.cuh"

namespace wheelops::cuda {

// Blocks of `kKernel` with `threads` threads and `shared_bytes` dynamic shared
// memory that fit on one SM of `device` at once; at least 1.
//
// The driver's answer costs ~2-3 µs of host time a call on an H200's host, so
// each thread remembers its last few answers per kernel, each kept with the
// device, threads and shared memory it was for: one kernel's block size can
// vary with the row length (softmax's teams, the norms' backward), and a
// model alternates a few shapes, so an answer is never reused for another
// launch shape and a loop over a few shapes asks the driver once per shape.
template <auto kKernel>
int resident_blocks_per_sm(int threads, size_t shared_bytes, int32_t device) {
  struct Answer {
    int32_t device = -1;
    int threads = 0;
    size_t shared_bytes = 0;
    int blocks = 0;
  };
  constexpr int kRemembered = 4;
  thread_local std::array<Answer, kRemembered> answers{};
  thread_local int next = 0;
  for (const Answer& a : answers) {
    if (a.blocks > 0 && a.device == device && a.threads == threads &&
        a.shared_bytes == shared_bytes) {
      return a.blocks;
    }
  }
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, threads, shared_bytes) !=
      cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the launch check
    blocks = 1;
  }
  blocks = blocks > 0 ? blocks : 1;
  answers[next] = {device, threads, shared_bytes, blocks};
  next = (next + 1) % kRemembered;
  return blocks;
}

// Every block resident at once, one wave: `resident_blocks_per_sm` times the
// SM count, never more than `work_blocks` (the blocks the work could use).
template <auto kKernel>
unsigned int resident_grid(int threads, size_t shared_bytes, int64_t work_blocks, int32_t device) {
  const int64_t cap = int64_t{multiprocessor_count(device)} *
                      resident_blocks_per_sm<kKernel>(threads, shared_bytes, device);
  const int64_t blocks = work_blocks < cap ? work_blocks : cap;
  return static_cast<unsigned int>(blocks > 0 ? blocks : 1);
}

} // namespace wheelops::cuda
