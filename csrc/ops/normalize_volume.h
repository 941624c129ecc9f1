// Argument checks and the formula of wheelops::normalize_volume, shared by its
// CPU and CUDA kernels.
#pragma once

#include <torch/headeronly/macros/Macros.h>

#include <cmath>
#include <cstdint>

#include "wheelops/narrowing.h"
#include "wheelops/tensor_checks.h"

namespace wheelops::normalize_volume {

// The divisor: max_value rounded to float32, which must be positive and finite.
inline float check_args(const Tensor& vol, double max_value) {
  WHEELOPS_CHECK(
      vol.scalar_type() == ScalarType::UInt16,
      "wheelops.normalize_volume: argument 'vol' has dtype ",
      torch::headeronly::toString(vol.scalar_type()), "; expected uint16 (torch.uint16)");
  // A value above the largest float32 but within half its ulp still rounds to
  // it, so it is accepted as that (round_to).
  const float divisor = max_value > 0.0 ? round_to<float>(max_value) : 0.0f;
  WHEELOPS_CHECK(
      divisor > 0.0f && std::isfinite(divisor),
      "wheelops.normalize_volume: argument 'max_value' must be positive and finite in "
      "float32, got ",
      max_value);
  return divisor;
}

// vol / max_value as one float32 division: every uint16 is exact in float32,
// so this is the correctly rounded quotient (no reciprocal multiply).
C10_HOST_DEVICE inline float normalize_value(uint16_t v, float divisor) {
  return static_cast<float>(v) / divisor;
}

// Where the CUDA kernel's vector path reads and writes, in int64, shared with
// compile-time checks below (they run wherever this header compiles, CPU
// builds included). A warp converts a chunk of 256 voxels: lane L loads
// voxels 8L..8L+7 as one 16-byte word (uint4 index chunk * 32 + L) and, for
// half h in {0, 1}, stores voxels 128h + 4L..128h + 4L + 3 as one float4
// (float4 index chunk * 64 + 32h + L), taking them from the load of lane
// shuffle_source(h, L): its upper 8 bytes if L is odd, else its lower 8.
namespace layout {

constexpr int kWarpSize = 32;
constexpr int64_t kVoxelsPerChunk = 256;

C10_HOST_DEVICE constexpr int64_t load_index(int64_t chunk, int lane) {
  return chunk * kWarpSize + lane;
}

C10_HOST_DEVICE constexpr int64_t store_index(int64_t chunk, int half, int lane) {
  return chunk * 2 * kWarpSize + half * kWarpSize + lane;
}

C10_HOST_DEVICE constexpr int shuffle_source(int half, int lane) {
  return 16 * half + lane / 2;
}

// True if every stored voxel is the loaded voxel of the same index, and the
// indices of `chunk` do not wrap.
constexpr bool layout_is_exact(int64_t chunk) {
  for (int half = 0; half < 2; ++half) {
    for (int lane = 0; lane < kWarpSize; ++lane) {
      for (int e = 0; e < 4; ++e) {
        const int64_t stored = 4 * store_index(chunk, half, lane) + e;
        const int source = shuffle_source(half, lane);
        const int64_t loaded = 8 * load_index(chunk, source) + 4 * (lane & 1) + e;
        if (stored != loaded || stored != chunk * kVoxelsPerChunk + 128 * half + 4 * lane + e) {
          return false;
        }
      }
    }
  }
  return true;
}

static_assert(layout_is_exact(0), "normalize_volume: the shuffle layout is wrong");
static_assert(layout_is_exact(12345), "normalize_volume: the shuffle layout is wrong");
// Chunks on both sides of voxel 2**31 and far beyond 2**32 voxels.
static_assert(
    layout_is_exact((int64_t{1} << 31) / kVoxelsPerChunk - 1) &&
        layout_is_exact((int64_t{1} << 31) / kVoxelsPerChunk) &&
        layout_is_exact((int64_t{1} << 40) / kVoxelsPerChunk + 7),
    "normalize_volume: the shuffle layout wraps past 2**31 voxels");

} // namespace layout

} // namespace wheelops::normalize_volume
