// The norm forward at large rows with its register budget forced (launch bounds 512, MINB).
#include "common.cuh"
#include "norm_lb.cuh"
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
  snprintf(name, 160, "MINB%d %s %s %ldx%ld", MINB, kC ? "ln" : "rms", tname, rows, cols);
  report(name, time_us([&] { ni::launch_forward<T, kVec, kC>(x, w, kC ? b : nullptr, o, m, r, RowsCols{rows, cols}, 1e-5, 0, 0, "ln"); }), bytes);
  cudaFree(x); cudaFree(w); cudaFree(b); cudaFree(o); cudaFree(m); cudaFree(r);
}
int main() {
  for (auto rc : {std::pair<int64_t, int64_t>{4096, 4096}, {4096, 8192}, {4096, 16384}, {8192, 8192}}) {
    run<BFloat16, true>("bf16", rc.first, rc.second); run<float, true>("fp32", rc.first, rc.second);
    run<BFloat16, false>("bf16", rc.first, rc.second); run<float, false>("fp32", rc.first, rc.second);
  }
}
