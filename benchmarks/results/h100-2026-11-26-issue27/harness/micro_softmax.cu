#include "common.cuh"
#include <torch/csrc/stable/library.h>
#undef STABLE_TORCH_LIBRARY_IMPL
#define STABLE_TORCH_LIBRARY_IMPL(ns, k, m) [[maybe_unused]] static void micro_unused_##k(torch::stable::detail::StableLibrary& m)
#include "softmax.cu"
using namespace wheelops;
namespace sm = wheelops::softmax;

template <typename T>
void run(const char* tname, int64_t rows, int64_t cols) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t n = rows * cols;
  T* g = randn<T>(n, 1); T* y = randn<T>(n, 2); T* o = randn<T>(n, 3);
  const double bytes = 3.0 * n * sizeof(T);
  char name[160];
  snprintf(name, 160, "smb current %s %ldx%ld", tname, rows, cols);
  report(name, time_us([&] { sm::launch_backward<T, kVec>(g, y, o, RowsCols{rows, cols}, 0, 0); }), bytes);
  snprintf(name, 160, "smf current %s %ldx%ld", tname, rows, cols);
  report(name, time_us([&] { sm::launch_forward<T, kVec>(g, o, RowsCols{rows, cols}, 0, 0); }), 2.0 * n * sizeof(T));
  const int vecs = cols / kVec;
  auto try_items = [&](auto it) {
    constexpr int kItems = decltype(it)::value;
    const int team = vecs / kItems;
    if (team < 32 || team > 512) return;
    for (int wave : {0, 1}) {
      int64_t blocks = rows;
      if (wave) { int per = 0; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, sm::softmax_backward_in_registers<T, kVec, kItems>, team, 0); blocks = std::min<int64_t>(rows, 132 * per); }
      snprintf(name, 160, "smb items%d team%d wave%d %s %ldx%ld", kItems, team, wave, tname, rows, cols);
      report(name, time_us([&] { sm::softmax_backward_in_registers<T, kVec, kItems><<<(unsigned)blocks, team>>>(g, y, o, rows, cols, team); }), bytes);
      if (wave) { int per = 0; cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, sm::softmax_forward_in_registers<T, kVec, kItems>, team, 0); blocks = std::min<int64_t>(rows, 132 * per); }
      snprintf(name, 160, "smf items%d team%d wave%d %s %ldx%ld", kItems, team, wave, tname, rows, cols);
      report(name, time_us([&] { sm::softmax_forward_in_registers<T, kVec, kItems><<<(unsigned)blocks, team>>>(g, o, rows, cols, team); }), 2.0 * n * sizeof(T));
    }
  };
  try_items(std::integral_constant<int, 1>{}); try_items(std::integral_constant<int, 2>{});
  try_items(std::integral_constant<int, 4>{}); try_items(std::integral_constant<int, 8>{});
  cudaFree(g); cudaFree(y); cudaFree(o);
}
int main() {
  run<BFloat16>("bf16", 4096, 4096); run<BFloat16>("bf16", 4096, 8192); run<BFloat16>("bf16", 8192, 8192);
  run<float>("fp32", 4096, 4096); run<float>("fp32", 4096, 16384); run<float>("fp32", 4096, 1024);
}
