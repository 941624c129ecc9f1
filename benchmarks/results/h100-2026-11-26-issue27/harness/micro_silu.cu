#include "common.cuh"
#include <torch/csrc/stable/library.h>
#undef STABLE_TORCH_LIBRARY_IMPL
#define STABLE_TORCH_LIBRARY_IMPL(ns, k, m) [[maybe_unused]] static void micro_unused_##k(torch::stable::detail::StableLibrary& m)
#include "silu_and_mul.cu"
using namespace wheelops;
namespace wc = wheelops::cuda;
namespace sam = wheelops::silu_and_mul;
// Flat over output vectors: row = v / vecs, c = v % vecs.
template <typename T, int kU>
__global__ void __launch_bounds__(256) silu_flat(const T* __restrict__ x, T* __restrict__ out, int64_t n_vec, int64_t vecs) {
  constexpr int kVec = 16 / sizeof(T);
  using V = wc::Vec<T, kVec>;
  using A = acc_type<T>;
  const int64_t tile = int64_t{blockDim.x} * kU;
  for (int64_t base = int64_t{blockIdx.x} * tile + threadIdx.x; base < n_vec; base += tile * gridDim.x) {
    V a[kU], b[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t i = base + int64_t{u} * blockDim.x;
      if (i < n_vec) { const int64_t r = i / vecs, c = i - r * vecs; a[u] = wc::load_vec<T, kVec>(x, r * 2 * vecs + c); b[u] = wc::load_vec<T, kVec>(x, r * 2 * vecs + vecs + c); }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t i = base + int64_t{u} * blockDim.x;
      if (i < n_vec) {
        V y;
#pragma unroll
        for (int j = 0; j < kVec; ++j) y.val[j] = static_cast<T>(sam::forward_value<T>(static_cast<A>(a[u].val[j]), static_cast<A>(b[u].val[j])));
        wc::store_vec<T, kVec>(out, i, y);
      }
    }
  }
}
template <typename T>
void run(const char* tname, int64_t rows, int64_t d) {
  constexpr int kVec = 16 / sizeof(T);
  T* x = randn<T>(rows * 2 * d, 1); T* o = randn<T>(rows * d, 3);
  const double bytes = 3.0 * rows * d * sizeof(T);
  char name[160];
  snprintf(name, 160, "silu current %s %ldx(2x%ld)", tname, rows, d);
  static wc::OccupancyCache cache{};
  report(name, time_us([&] { sam::launch_rows(cache, sam::silu_and_mul_forward_kernel<T, kVec>, d / kVec, rows, sam::kForwardRows, 0, 0, x, o, rows, d); }), bytes);
  const int64_t n_vec = rows * d / kVec;
  auto go = [&](auto ut) {
    constexpr int kU = decltype(ut)::value;
    int64_t blocks = (n_vec + 256 * kU - 1) / (256 * kU);
    snprintf(name, 160, "silu flat u%d %s %ldx(2x%ld)", kU, tname, rows, d);
    report(name, time_us([&] { silu_flat<T, kU><<<(unsigned)blocks, 256>>>(x, o, n_vec, d / kVec); }), bytes);
  };
  go(std::integral_constant<int, 1>{}); go(std::integral_constant<int, 2>{}); go(std::integral_constant<int, 4>{});
  cudaFree(x); cudaFree(o);
}
int main() {
  run<float>("fp32", 4096, 16384); run<float>("fp32", 4096, 4096); run<float>("fp32", 4096, 1024);
  run<BFloat16>("bf16", 4096, 16384); run<BFloat16>("bf16", 4096, 4096); run<BFloat16>("bf16", 4096, 1024);
}
