// CUTLASS kernels for fused_linear_gelu_sm90a.h: a TMA, warp-specialized, persistent
// GEMM (the cooperative schedule) whose epilogue visitor tree computes
//   out = gelu(acc + bias)  (float32, the erf formula of kernels/gelu_16bit.cuh, then one
//                            rounding)
// One tile configuration, chosen by measurement on an H200 among 19 (cooperative and
// ping-pong; 64x256, 128x128, 128x256, 256x128 tiles; 1x1, 2x1, 1x2 clusters;
// benchmarks/results/h200-2026-11-29-issue44): 256x128x64 tiles on a 1x2 cluster, bf16
// 8192x768->3072 86.0 us (128x256 on 2x1, the previous choice: 86.7), 8192x4096->16384
// 1803 (1868), 8192x4096->11008 1189 (1199), 8192x1024->4096 141.2 (136.7; eager 141.7).
// It serves problems of at least kMinWaves waves of tiles: at 96 tiles (1024x768->3072) the
// previous tiles took 17.9 us where cuBLASLt's GEMM and the GELU pass took 16.6 (H100).
// Inference only: where the backward needs the pre-activation, the kernel that also wrote it
// was no faster than cuBLASLt's GEMM and the GELU pass, which write and read it anyway
// (bf16, H200: 148.0 against 141.7 us at 8192x1024->4096, 93.8 against 94.5 at
// 8192x768->3072), so fused_linear_gelu.cu takes those there.
#include "fused_linear_gelu_sm90a.h"

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <limits>

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

template <typename Element>
struct Kernel {
  using LayoutX = cutlass::layout::RowMajor;     // x [m, k]
  using LayoutW = cutlass::layout::ColumnMajor;  // w [n, k] row-major: B (k x n), k-major
  using LayoutOut = cutlass::layout::RowMajor;
  using TileShape = Shape<_256, _128, _64>;
  static_assert(size<0>(TileShape{}) == kTileM && size<1>(TileShape{}) == kTileN);
  using ClusterShape = Shape<_1, _2, _1>;
  using Fusion =
      cutlass::epilogue::fusion::LinCombPerColBiasEltAct<ExactGelu, Element, float, Element>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutOut,
      kAlignment, Element, LayoutOut, kAlignment,
      cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutX, kAlignment,
      Element, LayoutW, kAlignment, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using GemmKernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
};

template <typename Element>
bool launch(const Problem& p, cudaStream_t stream) {
  using Gemm = typename Kernel<Element>::Gemm;
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
                        aligned_16(p.bias) && aligned_16(p.out);
  const int64_t tiles = ((p.m + kTileM - 1) / kTileM) * ((p.n + kTileN - 1) / kTileN);
  return sizes && pointers && tiles >= kMinWaves * p.sm_count;
}

bool run(const Problem& p, cudaStream_t stream) {
  if (!fits(p)) {
    return false;
  }
  return p.dtype == Dtype::kBFloat16 ? launch<cutlass::bfloat16_t>(p, stream)
                                     : launch<cutlass::half_t>(p, stream);
}

} // namespace wheelops::fused_linear_gelu::sm90a
