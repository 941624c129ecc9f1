#include "common.cuh"
#include "wheelops/vectorized.cuh"
using namespace wheelops;
namespace wc = wheelops::cuda;
template <typename A> struct AddOp { __device__ A operator()(A a, A b) const { return a + b; } };
template <typename A> struct GradOp { A alpha; __device__ A operator()(A g, A x) const { return x <= A(0) ? A(0) : g * alpha; } };

template <typename T, int K, typename Op>
void launch_grid(T* out, wc::Inputs<T, K> in, int64_t n, Op op, int threads, int64_t cap) {
  constexpr int kVec = wc::kVecSize<T>;
  int64_t blocks = (n / kVec + threads * wc::kUnroll - 1) / (threads * wc::kUnroll);
  if (cap > 0 && blocks > cap) blocks = cap;
  wc::elementwise_kernel<T, kVec, K, Op><<<(unsigned)blocks, threads>>>(out, in, n, op);
}

// relu mask: 8 elements per item, bit j of byte k = element 8k + j passes the gradient.
template <typename T, int kItems>
__global__ void relu_fwd_mask(const T* __restrict__ x, T* __restrict__ out, uint8_t* __restrict__ mask, int64_t n, float alpha) {
  constexpr int kVec = wc::kVecSize<T>;
  constexpr int kPer = 8 / kVec;  // vectors per item (bf16 1, fp32 2)
  using V = wc::Vec<T, kVec>;
  const int64_t items = n / 8;
  const int64_t tile = int64_t{blockDim.x} * kItems;
  for (int64_t base = int64_t{blockIdx.x} * tile + threadIdx.x; base < items; base += tile * gridDim.x) {
    V v[kItems][kPer];
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const int64_t it = base + int64_t{u} * blockDim.x;
      if (it < items) {
#pragma unroll
        for (int p = 0; p < kPer; ++p) v[u][p] = wc::load_vec<T, kVec>(x, it * kPer + p);
      }
    }
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const int64_t it = base + int64_t{u} * blockDim.x;
      if (it < items) {
        uint32_t bits = 0;
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
          V y;
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const float a = static_cast<float>(v[u][p].val[j]);
            y.val[j] = static_cast<T>((a < 0.f ? 0.f : a) * alpha);
            bits |= uint32_t{!(a <= 0.f)} << (p * kVec + j);
          }
          wc::store_vec<T, kVec>(out, it * kPer + p, y);
        }
        mask[it] = static_cast<uint8_t>(bits);
      }
    }
  }
}
template <typename T, int kItems>
__global__ void relu_bwd_mask(const T* __restrict__ g, const uint8_t* __restrict__ mask, T* __restrict__ gx, int64_t n, float alpha) {
  constexpr int kVec = wc::kVecSize<T>;
  constexpr int kPer = 8 / kVec;
  using V = wc::Vec<T, kVec>;
  const int64_t items = n / 8;
  const int64_t tile = int64_t{blockDim.x} * kItems;
  for (int64_t base = int64_t{blockIdx.x} * tile + threadIdx.x; base < items; base += tile * gridDim.x) {
    V v[kItems][kPer];
    uint8_t m[kItems];
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const int64_t it = base + int64_t{u} * blockDim.x;
      if (it < items) {
        m[u] = mask[it];
#pragma unroll
        for (int p = 0; p < kPer; ++p) v[u][p] = wc::load_vec<T, kVec>(g, it * kPer + p);
      }
    }
#pragma unroll
    for (int u = 0; u < kItems; ++u) {
      const int64_t it = base + int64_t{u} * blockDim.x;
      if (it < items) {
#pragma unroll
        for (int p = 0; p < kPer; ++p) {
          V y;
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            y.val[j] = (m[u] >> (p * kVec + j)) & 1 ? static_cast<T>(static_cast<float>(v[u][p].val[j]) * alpha) : T(0.f);
          }
          wc::store_vec<T, kVec>(gx, it * kPer + p, y);
        }
      }
    }
  }
}

template <typename T>
void run(const char* tname, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  const double e = sizeof(T);
  T* a = randn<T>(n, 1); T* b = randn<T>(n, 2); T* o = randn<T>(n, 3);
  uint8_t* mask; CK(cudaMalloc(&mask, n / 8));
  char name[128];
  wc::Inputs<T, 2> in{{a, b}};
  using A = acc_type<T>;
  snprintf(name, 128, "copy %s %ldx%ld (2N e)", tname, rows, cols); report(name, copy_us(2 * n * e / 2 * 2 / 2 * 1) , 2 * n * e / 2);
  snprintf(name, 128, "add current %s %ldx%ld", tname, rows, cols);
  report(name, time_us([&] { wc::launch_elementwise(o, in, n, AddOp<A>{}, 0, 0, "add"); }), 3 * n * e);
  for (int threads : {128, 256, 512}) {
    snprintf(name, 128, "add uncapped t%d %s %ldx%ld", threads, tname, rows, cols);
    report(name, time_us([&] { launch_grid(o, in, n, AddOp<A>{}, threads, 0); }), 3 * n * e);
  }
  snprintf(name, 128, "relu bwd current (reads x) %s %ldx%ld", tname, rows, cols);
  report(name, time_us([&] { wc::launch_elementwise(o, in, n, GradOp<A>{1.7f}, 0, 0, "g"); }), 3 * n * e);
  snprintf(name, 128, "relu bwd current uncapped %s %ldx%ld", tname, rows, cols);
  report(name, time_us([&] { launch_grid(o, in, n, GradOp<A>{1.7f}, 256, 0); }), 3 * n * e);
  for (int threads : {256}) {
    const int64_t items = n / 8;
    for (int cap : {0, 1}) {
      int64_t blocks = (items + threads * 4 - 1) / (threads * 4);
      if (cap) blocks = std::min<int64_t>(blocks, 132 * 8);
      snprintf(name, 128, "relu fwd+mask cap%d %s %ldx%ld", cap, tname, rows, cols);
      report(name, time_us([&] { relu_fwd_mask<T, 4><<<blocks, threads>>>(a, o, mask, n, 1.7f); }), 2 * n * e + n / 8);
      snprintf(name, 128, "relu bwd mask cap%d %s %ldx%ld", cap, tname, rows, cols);
      report(name, time_us([&] { relu_bwd_mask<T, 4><<<blocks, threads>>>(b, mask, o, n, 1.7f); }), 2 * n * e + n / 8);
    }
  }
  cudaFree(a); cudaFree(b); cudaFree(o); cudaFree(mask);
}
int main() {
  run<float>("fp32", 4096, 16384); run<float>("fp32", 4096, 4096); run<float>("fp32", 4096, 1024);
  run<BFloat16>("bf16", 4096, 16384); run<BFloat16>("bf16", 4096, 4096); run<BFloat16>("bf16", 4096, 1024);
}
