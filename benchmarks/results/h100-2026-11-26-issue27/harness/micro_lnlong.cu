// layer_norm / rms_norm forward at large rows: the register kernel (production) against the
// long-rows kernel (the row re-read from L2), at several block sizes.
#include "common.cuh"
#include "norm_cuda.cuh"
using namespace wheelops;
namespace ni = wheelops::norm::cuda_impl;
template <typename T, bool kC>
void run(const char* tname, int64_t rows, int64_t cols) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t n = rows * cols;
  T* x = randn<T>(n, 1); T* w = randn<T>(cols, 2); T* b = randn<T>(cols, 3); T* o = randn<T>(n, 4);
  float *m, *r; CK(cudaMalloc(&m, rows * 4)); CK(cudaMalloc(&r, rows * 4));
  const double bytes = (2.0 * n + 2 * cols) * sizeof(T);
  char name[160];
  for (int rep = 0; rep < 2; ++rep) {
    snprintf(name, 160, "%s production %s %ldx%ld", kC ? "ln" : "rms", tname, rows, cols);
    report(name, time_us([&] { ni::launch_forward<T, kVec, kC>(x, w, kC ? b : nullptr, o, m, r, RowsCols{rows, cols}, 1e-5, 0, 0, "ln"); }), bytes);
    for (int threads : {256, 512, 1024}) {
      for (int per : {2, 4, 8}) {
        const int64_t grid = std::min<int64_t>(rows, int64_t{132} * per);
        snprintf(name, 160, "%s long t%d grid%dpsm %s %ldx%ld", kC ? "ln" : "rms", threads, per, tname, rows, cols);
        report(name, time_us([&] { ni::forward_long_rows_kernel<T, kVec, kC><<<(unsigned)grid, threads>>>(x, w, kC ? b : nullptr, o, m, r, rows, cols, 1e-5f); }), bytes);
      }
    }
  }
  cudaFree(x); cudaFree(w); cudaFree(b); cudaFree(o); cudaFree(m); cudaFree(r);
}
int main() {
  run<BFloat16, true>("bf16", 4096, 16384); run<BFloat16, true>("bf16", 8192, 8192); run<BFloat16, true>("bf16", 4096, 8192);
  run<float, true>("fp32", 4096, 16384);
}
