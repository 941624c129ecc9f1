// CUTLASS kernels for fused_linear_gelu_sm90a.h: a TMA, warp-specialized, persistent
// GEMM whose epilogue visitor tree computes
//   pre = acc + bias        (float32; stored rounded to the dtype where kept)
//   out = gelu(pre)         (float32, the erf formula of kernels/gelu_16bit.cuh, then one
//                            rounding)
// Two configurations, by K (run()), chosen by measurement on an H200:
// - K <= kSm90aPingpongMaxK (1024), ping-pong 128x128x64 tiles on a 2x1 cluster: each warp
//   group's epilogue overlaps the other's mainloop, which at small K is short enough for the
//   epilogue to matter. With the 16-bit erf, bf16 8192x1024->4096 126.0 -> 118.6 us (eager
//   149.8, the GEMM alone 103.8), 8192x768->3072 80.0 -> 78.7 (eager 100.7), float16 the same
//   within 1% (benchmarks/results/h200-2026-11-30-issues43-45b).
// - Above, cooperative 256x128x64 tiles on a 1x2 cluster, the best of 19 configurations
//   (cooperative and ping-pong; 64x256, 128x128, 128x256, 256x128 tiles; 1x1, 2x1, 1x2
//   clusters; benchmarks/results/h200-2026-11-29-issue44). Ping-pong loses 9-10% at K =
//   4096 (8192x4096->11008 bf16 1093 against 996 us), where the mainloop dominates.
// It serves problems of at least kMinWaves waves of 256x128 tiles: at 96 tiles (1024x768->3072)
// the kernel took 17.9 us where cuBLASLt's GEMM and the GELU pass took 16.6 (H100).
// The training forward (the pre-activation kept for the backward) takes the ping-pong kernel
// that also writes it, so only up to kSm90aPingpongMaxK: against cuBLASLt's BIAS GEMM and
// the GELU pass, which write and read it anyway, bf16 8192x1024->4096 forward 141.8 -> 126.2
// us, forward+backward 374.8 -> 359.0 (1.11x -> 1.16x eager); 8192x768->3072 95.7 -> 88.2,
// 256.2 -> 251.7; float16 the same (benchmarks/results/h200-2026-11-30-issues43-45b). With
// the cooperative kernel and the erff epilogue it had been no faster (h200-2026-11-29-issue44).
#include "fused_linear_gelu_sm90a.h"

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <limits>
#include <type_traits>

#include "fused_linear_gelu_path.h"
#include "wheelops/kernels/gelu_16bit.cuh"

namespace wheelops::fused_linear_gelu::sm90a {
namespace {

using namespace cute;

// The epilogue's activation (float32): the erf GELU of every 16-bit wheelops kernel.
template <typename T>
struct ExactGelu {
  CUTLASS_DEVICE T operator()(T const& u) const {
    return gelu::forward_16bit(u);
  }
};

template <typename T, int N>
struct ExactGelu<cutlass::Array<T, N>> {
  CUTLASS_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& u) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) {
      y[i] = gelu::forward_16bit(u[i]);
    }
    return y;
  }
};

constexpr int kAlignment = 8;  // elements: 16 bytes of a 16-bit type
constexpr int64_t kTileM = 256, kTileN = 128;
constexpr int64_t kMinWaves = 4;

// The two schedules of run(), by K (kSm90aPingpongMaxK, fused_linear_gelu_path.h).
// Cooperative: both consumer warp groups share one 256x128 tile, so its epilogue (the GELU)
// runs with the tensor cores idle. Ping-pong: each warp group owns a 128x128 tile and its
// epilogue overlaps the other's mainloop.
struct Cooperative256x128 {
  using TileShape = Shape<_256, _128, _64>;
  using ClusterShape = Shape<_1, _2, _1>;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
};
struct Pingpong128x128 {
  using TileShape = Shape<_128, _128, _64>;
  using ClusterShape = Shape<_2, _1, _1>;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
  using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
};
static_assert(size<0>(Cooperative256x128::TileShape{}) == kTileM &&
              size<1>(Cooperative256x128::TileShape{}) == kTileN);

template <typename Element, typename Config, bool kKeepPre = false>
struct Kernel {
  using LayoutX = cutlass::layout::RowMajor;     // x [m, k]
  using LayoutW = cutlass::layout::ColumnMajor;  // w [n, k] row-major: B (k x n), k-major
  using LayoutOut = cutlass::layout::RowMajor;
  using TileShape = typename Config::TileShape;
  using ClusterShape = typename Config::ClusterShape;
  using Fusion = std::conditional_t<
      kKeepPre,
      cutlass::epilogue::fusion::LinCombPerColBiasEltActAux<
          LayoutOut, ExactGelu, Element, float, Element, Element>,
      cutlass::epilogue::fusion::LinCombPerColBiasEltAct<ExactGelu, Element, float, Element>>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutOut,
      kAlignment, Element, LayoutOut, kAlignment,
      typename Config::EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutX, kAlignment,
      Element, LayoutW, kAlignment, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      typename Config::MainloopSchedule>::CollectiveOp;
  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

template <typename Element, typename Config, bool kKeepPre = false>
bool launch(const Problem& p, cudaStream_t stream) {
  using Gemm = typename Kernel<Element, Config, kKeepPre>::Gemm;
  using GemmKernel = typename Gemm::GemmKernel;
  const int m = static_cast<int>(p.m);
  const int n = static_cast<int>(p.n);
  const int k = static_cast<int>(p.k);
  typename GemmKernel::StrideA stride_x{};
  typename GemmKernel::StrideB stride_w{};
  typename GemmKernel::StrideD stride_out{};
  get<0>(stride_x) = p.k;
  get<0>(stride_w) = p.k;
  get<0>(stride_out) = p.n;
  cutlass::KernelHardwareInfo hw{p.device, p.sm_count};
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k, 1},
      {static_cast<const Element*>(p.x), stride_x, static_cast<const Element*>(p.w), stride_w},
      {{}, nullptr, stride_out, static_cast<Element*>(p.out), stride_out},
      hw};
  args.epilogue.thread.bias_ptr = static_cast<const Element*>(p.bias);
  if constexpr (kKeepPre) {
    args.epilogue.thread.aux_ptr = static_cast<Element*>(p.pre);
    args.epilogue.thread.dAux = stride_out;
  }
  Gemm gemm;
  // The persistent scheduler without stream-K needs no workspace; where a CUTLASS
  // version would, decline rather than allocate outside torch's allocator.
  if (Gemm::get_workspace_size(args) != 0 ||
      gemm.can_implement(args) != cutlass::Status::kSuccess) {
    return false;
  }
  return gemm.initialize(args, nullptr, stream) == cutlass::Status::kSuccess &&
         gemm.run(stream) == cutlass::Status::kSuccess;
}

bool aligned_16(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

} // namespace

bool fits(const Problem& p) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  const bool sizes = p.m > 0 && p.n > 0 && p.k > 0 && p.m <= kMax && p.n <= kMax &&
                     p.k <= kMax && p.n % kAlignment == 0 && p.k % kAlignment == 0;
  const bool pointers = aligned_16(p.x) && aligned_16(p.w) && p.bias != nullptr &&
                        aligned_16(p.bias) && aligned_16(p.out) &&
                        (p.pre == nullptr || aligned_16(p.pre));
  const int64_t tiles = ((p.m + kTileM - 1) / kTileM) * ((p.n + kTileN - 1) / kTileN);
  return sizes && pointers && tiles >= kMinWaves * p.sm_count;
}

bool run(const Problem& p, cudaStream_t stream) {
  if (!fits(p)) {
    return false;
  }
  const bool bf16 = p.dtype == Dtype::kBFloat16;
  if (p.pre != nullptr) {
    return bf16 ? launch<cutlass::bfloat16_t, Pingpong128x128, true>(p, stream)
                : launch<cutlass::half_t, Pingpong128x128, true>(p, stream);
  }
  if (p.k <= kSm90aPingpongMaxK) {
    return bf16 ? launch<cutlass::bfloat16_t, Pingpong128x128>(p, stream)
                : launch<cutlass::half_t, Pingpong128x128>(p, stream);
  }
  return bf16 ? launch<cutlass::bfloat16_t, Cooperative256x128>(p, stream)
              : launch<cutlass::half_t, Cooperative256x128>(p, stream);
}

} // namespace wheelops::fused_linear_gelu::sm90a
