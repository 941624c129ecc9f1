#include "common.cuh"
#include "norm_cuda.cuh"
using namespace wheelops;
namespace ni = wheelops::norm::cuda_impl;

template <typename T, int kN, bool kC>
double run_cfg(const T* x, const T* w, const T* b, T* o, float* m, float* r, int64_t rows, int64_t cols, int tx, int ty, int64_t grid_cap) {
  constexpr int kVec = 16 / sizeof(T);
  int64_t groups = (rows + ty - 1) / ty;
  int64_t grid = std::min<int64_t>(groups, grid_cap);
  return time_us([&] {
    ni::forward_registers_kernel<T, kVec, kN, kC><<<(unsigned)grid, dim3(tx, ty)>>>(x, w, b, o, m, r, rows, cols, 1e-5f);
  });
}

template <typename T, bool kC>
void run(const char* tname, int64_t rows, int64_t cols) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t n = rows * cols;
  T* x = randn<T>(n, 1); T* w = randn<T>(cols, 2); T* b = randn<T>(cols, 3); T* o = randn<T>(n, 4);
  float *m, *r; CK(cudaMalloc(&m, rows * 4)); CK(cudaMalloc(&r, rows * 4));
  const double bytes = (2.0 * n + 2 * cols) * sizeof(T);
  char name[160];
  const char* op = kC ? "ln" : "rms";
  snprintf(name, 160, "%s current %s %ldx%ld", op, tname, rows, cols);
  report(name, time_us([&] { ni::launch_forward<T, kVec, kC>(x, w, kC ? b : nullptr, o, m, r, RowsCols{rows, cols}, 1e-5, 0, 0, "ln"); }), bytes);
  const int64_t vecs = cols / kVec;
  auto try_n = [&](auto nt) {
    constexpr int kN = decltype(nt)::value;
    int tx = (int)((vecs + kN - 1) / kN);
    if (tx < 32 || tx > 1024 || tx % 32) return;
    for (int ty : {1, 2, 4, 8, 16}) {
      if (tx * ty > 1024 || tx * ty < 128) continue;
      for (int64_t cap : {int64_t{1} << 30, int64_t{132} * (2048 / (tx * ty))}) {
        snprintf(name, 160, "%s n%d tx%d ty%d cap%s %s %ldx%ld", op, kN, tx, ty, cap > (1 << 29) ? "none" : "wave", tname, rows, cols);
        report(name, run_cfg<T, kN, kC>(x, w, kC ? b : nullptr, o, m, r, rows, cols, tx, ty, cap), bytes);
      }
    }
  };
  try_n(std::integral_constant<int, 1>{}); try_n(std::integral_constant<int, 2>{});
  try_n(std::integral_constant<int, 4>{}); try_n(std::integral_constant<int, 8>{});
  cudaFree(x); cudaFree(w); cudaFree(b); cudaFree(o); cudaFree(m); cudaFree(r);
}
int main() {
  for (int64_t cols : {1024, 4096, 16384}) {
    run<BFloat16, true>("bf16", 4096, cols); run<float, true>("fp32", 4096, cols);
    run<BFloat16, false>("bf16", 4096, cols); run<float, false>("fp32", 4096, cols);
  }
  run<BFloat16, true>("bf16", 8192, 8192); run<float, true>("fp32", 8192, 8192);
  printf("copy 4096x4096 bf16 equiv: "); report("copy 64MiB", copy_us(4096*4096*2), 2.0*4096*4096*2);
}
