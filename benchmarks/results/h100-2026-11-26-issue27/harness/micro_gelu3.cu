#include "common.cuh"
#include <torch/csrc/stable/library.h>
#undef STABLE_TORCH_LIBRARY_IMPL
#define STABLE_TORCH_LIBRARY_IMPL(ns, k, m) [[maybe_unused]] static void micro_unused_##k(torch::stable::detail::StableLibrary& m)
#include "bias_gelu.cu"
using namespace wheelops;
namespace wc = wheelops::cuda;

__device__ __forceinline__ float one_plus_erf_fast(float z) {
  const float a = fabsf(z);
  const float t = __fdividef(1.0f, fmaf(0.5f, a, 1.0f));
  float p = fmaf(t, 0.17087277f, -0.82215223f);
  p = fmaf(t, p, 1.48851587f);
  p = fmaf(t, p, -1.13520398f);
  p = fmaf(t, p, 0.27886807f);
  p = fmaf(t, p, -0.18628806f);
  p = fmaf(t, p, 0.09678418f);
  p = fmaf(t, p, 0.37409196f);
  p = fmaf(t, p, 1.00002368f);
  p = fmaf(t, p, -1.26551223f);
  const float e = t * __expf(fmaf(-a, a, p));
  return z >= 0.f ? 2.0f - e : e;
}
template <int kMath> __device__ __forceinline__ float gelu_v(float u) {
  if constexpr (kMath == 0) return 0.5f * u * (1.0f + erff(u * 0.70710678f));
  else return 0.5f * u * one_plus_erf_fast(u * 0.70710678f);
}
// Flat: vectors of the whole tensor, col = v % col_vecs, kU vectors in flight per thread.
template <typename T, int kU, int kMath, int kMinBlocks>
__global__ void __launch_bounds__(256, kMinBlocks) gelu_flat(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out, int64_t n_vec, int64_t col_vecs) {
  constexpr int kVec = 16 / sizeof(T);
  using V = wc::Vec<T, kVec>;
  const int64_t tile = int64_t{blockDim.x} * kU;
  for (int64_t base = int64_t{blockIdx.x} * tile + threadIdx.x; base < n_vec; base += tile * gridDim.x) {
    V v[kU], b[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t i = base + int64_t{u} * blockDim.x;
      if (i < n_vec) { v[u] = wc::load_vec<T, kVec>(x, i); b[u] = wc::load_vec<T, kVec>(bias, i % col_vecs); }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t i = base + int64_t{u} * blockDim.x;
      if (i < n_vec) {
        V y;
#pragma unroll
        for (int j = 0; j < kVec; ++j) y.val[j] = static_cast<T>(gelu_v<kMath>(static_cast<float>(v[u].val[j]) + static_cast<float>(b[u].val[j])));
        wc::store_vec<T, kVec>(out, i, y);
      }
    }
  }
}
template <typename T, int kU, int kMath, int kMinBlocks>
double flat(const T* x, const T* b, T* o, int64_t rows, int64_t cols) {
  constexpr int kVec = 16 / sizeof(T);
  int64_t n_vec = rows * cols / kVec;
  int64_t blocks = (n_vec + 256 * kU - 1) / (256 * kU);
  return time_us([&] { gelu_flat<T, kU, kMath, kMinBlocks><<<(unsigned)blocks, 256>>>(x, b, o, n_vec, cols / kVec); });
}
__global__ void err_kernel(float* maxerr) {
  // compare one_plus_erf_fast with 1+erf in double over a grid of z
  float worst_rel = 0, worst_abs = 0;
  for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < 2000000; i += blockDim.x * gridDim.x) {
    float z = -9.0f + 18.0f * i / 2000000.0f;
    double ref = 1.0 + erf((double)z);
    double got = one_plus_erf_fast(z);
    double rel = ref > 0 ? fabs(got - ref) / ref : 0;
    if (ref > 1e-30 && rel > worst_rel) worst_rel = rel;
    double ab = fabs(got - ref); if (ab > worst_abs) worst_abs = ab;
    double gf = 1.0 + (double)erff(z);
  }
  atomicMax((int*)&maxerr[0], __float_as_int(worst_rel));
  atomicMax((int*)&maxerr[1], __float_as_int(worst_abs));
}
template <typename T>
void run(const char* tname, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  T* x = randn<T>(n, 1); T* b = randn<T>(cols, 2); T* o = randn<T>(n, 3);
  const double bytes = (2.0 * n + cols) * sizeof(T);
  char name[160];
  for (int rep = 0; rep < 2; ++rep) {
    snprintf(name, 160, "gelu production(tile) %s %ldx%ld", tname, rows, cols);
    report(name, time_us([&] { launch_forward<T, 16 / sizeof(T), gelu::Approximate::kNone>(x, b, o, RowsCols{rows, cols}, 0, 0); }), bytes);
    snprintf(name, 160, "gelu flat u1 erff %s %ldx%ld", tname, rows, cols); report(name, flat<T, 1, 0, 1>(x, b, o, rows, cols), bytes);
    snprintf(name, 160, "gelu flat u1 fast %s %ldx%ld", tname, rows, cols); report(name, flat<T, 1, 1, 1>(x, b, o, rows, cols), bytes);
    snprintf(name, 160, "gelu flat u2 erff %s %ldx%ld", tname, rows, cols); report(name, flat<T, 2, 0, 1>(x, b, o, rows, cols), bytes);
  }
  cudaFree(x); cudaFree(b); cudaFree(o);
}
int main() {
  run<float>("fp32", 4096, 16384); run<float>("fp32", 8192, 8192); run<float>("fp32", 4096, 4096); run<float>("fp32", 4096, 1024);
  run<BFloat16>("bf16", 4096, 16384); run<BFloat16>("bf16", 4096, 4096); run<BFloat16>("bf16", 4096, 1024);
}
