#include "common.cuh"
#include <torch/csrc/stable/library.h>
#undef STABLE_TORCH_LIBRARY_IMPL
#define STABLE_TORCH_LIBRARY_IMPL(ns, k, m) [[maybe_unused]] static void micro_unused_##k(torch::stable::detail::StableLibrary& m)
#include "silu_and_mul.cu"
using namespace wheelops;
namespace wc = wheelops::cuda;
namespace sam = wheelops::silu_and_mul;
// Backward flat over output vectors: row = v / vecs, c = v % vecs.
template <typename T>
__global__ void __launch_bounds__(256) silu_bwd_flat(const T* __restrict__ grad, const T* __restrict__ x, T* __restrict__ gx, int64_t n_vec, int64_t vecs) {
  constexpr int kVec = 16 / sizeof(T);
  using V = wc::Vec<T, kVec>;
  using A = acc_type<T>;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n_vec; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / vecs, c = i - r * vecs;
    const V g = wc::load_vec<T, kVec>(grad, i);
    const V a = wc::load_vec<T, kVec>(x, r * 2 * vecs + c);
    const V b = wc::load_vec<T, kVec>(x, r * 2 * vecs + vecs + c);
    V ga, gb;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      A da, db;
      sam::backward(static_cast<A>(g.val[j]), static_cast<A>(a.val[j]), static_cast<A>(b.val[j]), da, db);
      ga.val[j] = static_cast<T>(da); gb.val[j] = static_cast<T>(db);
    }
    wc::store_vec<T, kVec>(gx, r * 2 * vecs + c, ga);
    wc::store_vec<T, kVec>(gx, r * 2 * vecs + vecs + c, gb);
  }
}
template <typename T>
void run(const char* tname, int64_t rows, int64_t d) {
  constexpr int kVec = 16 / sizeof(T);
  T* x = randn<T>(rows * 2 * d, 1); T* g = randn<T>(rows * d, 2); T* o = randn<T>(rows * 2 * d, 3);
  const double bytes = 5.0 * rows * d * sizeof(T);
  char name[160];
  static wc::OccupancyCache cache{};
  const int64_t n_vec = rows * d / kVec;
  for (int rep = 0; rep < 2; ++rep) {
    snprintf(name, 160, "silu bwd current %s %ldx(2x%ld)", tname, rows, d);
    report(name, time_us([&] { sam::launch_rows(cache, sam::silu_and_mul_backward_kernel<T, kVec>, d / kVec, rows, 1, 0, 0, g, x, o, rows, d); }), bytes);
    snprintf(name, 160, "silu bwd flat %s %ldx(2x%ld)", tname, rows, d);
    report(name, time_us([&] { silu_bwd_flat<T><<<(unsigned)((n_vec + 255) / 256), 256>>>(g, x, o, n_vec, d / kVec); }), bytes);
  }
  cudaFree(x); cudaFree(o); cudaFree(g);
}
int main() {
  run<float>("fp32", 4096, 16384); run<float>("fp32", 8192, 8192); run<float>("fp32", 4096, 4096); run<float>("fp32", 4096, 1024);
  run<BFloat16>("bf16", 4096, 16384); run<BFloat16>("bf16", 4096, 4096); run<BFloat16>("bf16", 4096, 1024);
}
