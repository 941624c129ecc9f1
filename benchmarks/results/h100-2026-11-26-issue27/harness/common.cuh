// Micro-benchmark helpers: L2 flushed before each rep, median of reps, cudaEvents.
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include <functional>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1);} } while (0)
static void* g_flush = nullptr;
static const size_t kFlush = 256u << 20;
inline double time_us(const std::function<void()>& fn, int reps = 30) {
  if (!g_flush) CK(cudaMalloc(&g_flush, kFlush));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaMemsetAsync(g_flush, i & 0xff, kFlush));
    cudaEventRecord(a); fn(); cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
__global__ void fill_kernel(unsigned* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed; x ^= x >> 13; x *= 0x5bd1e995; x ^= x >> 15;
    p[i] = x;
  }
}
// Random normal-ish values of T (sum of uniforms), n elements.
template <typename T> __global__ void randn_kernel(T* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned x = (unsigned)i * 2654435761u ^ seed; float s = 0;
    for (int k = 0; k < 4; ++k) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; s += (x & 0xffffff) / 16777216.0f; }
    p[i] = T((s - 2.0f) * 1.7f);
  }
}
template <typename T> T* randn(size_t n, unsigned seed) {
  T* p; CK(cudaMalloc(&p, n * sizeof(T))); randn_kernel<<<1024, 256>>>(p, n, seed); CK(cudaDeviceSynchronize()); return p;
}
inline double copy_us(size_t bytes) {
  void *s, *d; CK(cudaMalloc(&s, bytes)); CK(cudaMalloc(&d, bytes));
  double us = time_us([&] { cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice); });
  cudaFree(s); cudaFree(d); return us;
}
inline void report(const char* name, double us, double bytes) {
  printf("%-60s %9.1f us %7.0f GB/s\n", name, us, bytes / us / 1e3);
  fflush(stdout);
}
