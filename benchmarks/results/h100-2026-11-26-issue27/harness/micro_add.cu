// add / relu forward: the elementwise kernel's vectors in flight per thread (kU) at one tile per block.
#include "common.cuh"
#include "wheelops/vectorized.cuh"
using namespace wheelops;
namespace wc = wheelops::cuda;
template <typename A> struct AddOp { __device__ A operator()(A a, A b) const { return a + b; } };
template <typename A> struct ReluOp { A alpha; __device__ A operator()(A x) const { return (x < A(0) ? A(0) : x) * alpha; } };
template <typename T, int kVec, int K, int kU, typename Op>
__global__ void __launch_bounds__(256) ew(T* __restrict__ out, wc::Inputs<T, K> in, int64_t n, Op op) {
  using Seq = std::make_index_sequence<K>;
  const int64_t n_vec = n / kVec;
  const int64_t tile = int64_t{blockDim.x} * kU;
  for (int64_t base = int64_t{blockIdx.x} * tile + threadIdx.x; base < n_vec; base += tile * gridDim.x) {
    wc::Vec<T, kVec> x[kU][K];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t v = base + int64_t{u} * blockDim.x;
      if (v < n_vec) {
#pragma unroll
        for (int k = 0; k < K; ++k) x[u][k] = reinterpret_cast<const wc::Vec<T, kVec>*>(in.ptr[k])[v];
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t v = base + int64_t{u} * blockDim.x;
      if (v < n_vec) {
        wc::Vec<T, kVec> r;
#pragma unroll
        for (int j = 0; j < kVec; ++j) r.val[j] = wc::apply_at<T, kVec, K>(op, x[u], j, Seq{});
        reinterpret_cast<wc::Vec<T, kVec>*>(out)[v] = r;
      }
    }
  }
}
template <typename T, int K, int kU, typename Op>
double run_ew(T* out, wc::Inputs<T, K> in, int64_t n, Op op) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t blocks = (n / kVec + 256 * kU - 1) / (256 * kU);
  return time_us([&] { ew<T, kVec, K, kU, Op><<<(unsigned)blocks, 256>>>(out, in, n, op); });
}
template <typename T>
void run(const char* tname, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols; const double e = sizeof(T);
  T* a = randn<T>(n, 1); T* b = randn<T>(n, 2); T* o = randn<T>(n, 3);
  using A = acc_type<T>;
  wc::Inputs<T, 2> in2{{a, b}}; wc::Inputs<T, 1> in1{{a}};
  char name[128];
  for (int rep = 0; rep < 2; ++rep) {
    snprintf(name, 128, "add production %s %ldx%ld", tname, rows, cols);
    report(name, time_us([&] { wc::launch_elementwise(o, in2, n, AddOp<A>{}, 0, "add"); }), 3 * n * e);
    snprintf(name, 128, "add kU1 %s %ldx%ld", tname, rows, cols); report(name, run_ew<T, 2, 1>(o, in2, n, AddOp<A>{}), 3 * n * e);
    snprintf(name, 128, "add kU2 %s %ldx%ld", tname, rows, cols); report(name, run_ew<T, 2, 2>(o, in2, n, AddOp<A>{}), 3 * n * e);
    snprintf(name, 128, "relu production %s %ldx%ld", tname, rows, cols);
    report(name, time_us([&] { wc::launch_elementwise(o, in1, n, ReluOp<A>{1.7f}, 0, "r"); }), 2 * n * e);
    snprintf(name, 128, "relu kU1 %s %ldx%ld", tname, rows, cols); report(name, run_ew<T, 1, 1>(o, in1, n, ReluOp<A>{1.7f}), 2 * n * e);
    snprintf(name, 128, "relu kU2 %s %ldx%ld", tname, rows, cols); report(name, run_ew<T, 1, 2>(o, in1, n, ReluOp<A>{1.7f}), 2 * n * e);
  }
  cudaFree(a); cudaFree(b); cudaFree(o);
}
int main() {
  run<float>("fp32", 4096, 16384); run<float>("fp32", 4096, 4096); run<float>("fp32", 4096, 1024);
  run<BFloat16>("bf16", 4096, 16384); run<BFloat16>("bf16", 4096, 4096); run<BFloat16>("bf16", 4096, 1024);
}
