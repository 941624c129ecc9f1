// fused_linear_gelu's forward on Hopper (sm_90a): one CUTLASS GEMM whose epilogue adds the
// bias and applies the exact (erf) GELU in float32 before rounding, writing the pre-activation
// too where the backward needs it (in_features up to kSm90aPingpongMaxK: the path rule,
// fused_linear_gelu_path.h). cuBLASLt has no erf GELU epilogue.
//
// Compiled for sm_90a only (build_tools/compile/native_sources.py: `*_sm90a.cu`), with no torch
// headers, so that its CUTLASS templates cost one device pass per CUDA library. The
// library defines WHEELOPS_SM90A_KERNELS where this file's object is linked into it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace wheelops::fused_linear_gelu::sm90a {

enum class Dtype { kHalf, kBFloat16 };

struct Problem {
  Dtype dtype;
  const void* x;     // [m, k], row-major
  const void* w;     // [n, k], row-major
  const void* bias;  // [n]
  void* out;         // [m, n], row-major: gelu(x @ w^T + bias)
  void* pre;         // [m, n] or nullptr (not kept): x @ w^T + bias, rounded to the dtype
  int64_t m, n, k;
  int device;
  int sm_count;
};

// Whether this kernel serves the problem: shapes that fit its tiles' alignment (n and k
// multiples of 8, every pointer 16-byte aligned), sizes within int32 (CUTLASS's problem
// shape), a bias, and enough tiles to fill the GPU several times over (below that, cuBLASLt's
// GEMM and a GELU pass are faster: measured in the .cu). Which problems keep the
// pre-activation here (k <= kSm90aPingpongMaxK) is the path rule's to say, not this one's.
bool fits(const Problem& p);

// Launch on `stream`; false (nothing launched) where CUTLASS declines the problem, so the
// caller takes its other path.
bool run(const Problem& p, cudaStream_t stream);

} // namespace wheelops::fused_linear_gelu::sm90a
