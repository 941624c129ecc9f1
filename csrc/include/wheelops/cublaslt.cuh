// cuBLASLt GEMMs with fused epilogues, for the CUDA library of each CUDA major.
//
// The library links its own major's libcublasLt.so.N (the one PyTorch's CUDA wheels
// install; never bundled). Here: one handle per device, created at first use (never at
// import: no CUDA context before a GEMM runs) and kept for the process; the algorithm
// for each (shape, layout, dtype, epilogue, alignment, device) chosen once by
// cuBLASLt's heuristic and cached; the workspace from torch's caching allocator; the
// GEMM on torch's current stream. Every cuBLASLt status is checked and reported with
// its name and the call that returned it.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "wheelops/cuda_runtime.cuh"
#include "wheelops/error.h"
#include "wheelops/tensors.h"

namespace wheelops::cublaslt {

// The workspace cuBLASLt may ask for; the chosen algorithm's own need is allocated.
constexpr uint64_t kMaxWorkspaceBytes = uint64_t{32} << 20;

inline const char* status_name(cublasStatus_t status) {
  return cublasLtGetStatusName(status);
}

#define WHEELOPS_CUBLASLT_CHECK(expr, op)                                             \
  do {                                                                                \
    const cublasStatus_t wheelops_status_ = (expr);                                   \
    WHEELOPS_CHECK(                                                                   \
        wheelops_status_ == CUBLAS_STATUS_SUCCESS, "wheelops.", op, ": cuBLASLt ",    \
        #expr, " failed: ", ::wheelops::cublaslt::status_name(wheelops_status_), " (", \
        cublasLtGetStatusString(wheelops_status_), ")");                             \
  } while (0)

// The handle of `device`, created once by the first thread that asks. A mutex, not
// std::call_once: that binds pthread_once@GLIBC_2.34, newer than manylinux_2_28 allows
// (tests/test_distribution.py); an uncontended lock costs nanoseconds beside a GEMM.
inline cublasLtHandle_t handle(int32_t device, const char* op) {
  static std::mutex mutex;
  static std::array<bool, cuda::kMaxDevices> tried{};
  static std::array<cublasLtHandle_t, cuda::kMaxDevices> handles{};
  static std::array<cublasStatus_t, cuda::kMaxDevices> created{};
  WHEELOPS_CHECK(
      device >= 0 && device < cuda::kMaxDevices, "wheelops.", op, ": CUDA device index ",
      device, " is beyond the ", cuda::kMaxDevices, " devices wheelops keeps cuBLASLt handles for");
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!tried[device]) {
      created[device] = cublasLtCreate(&handles[device]);
      tried[device] = true;
    }
  }
  WHEELOPS_CHECK(
      created[device] == CUBLAS_STATUS_SUCCESS, "wheelops.", op,
      ": cuBLASLt cublasLtCreate failed on cuda:", device, ": ", status_name(created[device]),
      " (", cublasLtGetStatusString(created[device]), ")");
  return handles[device];
}

// One column-major GEMM D[m, n] = op(A)[m, k] @ op(B)[k, n] (+ epilogue), as cuBLASLt
// sees it. Row-major callers swap roles (see fused_linear_gelu.cu).
struct Gemm {
  cudaDataType_t type;  // of A, B, C, D, bias and aux
  cublasComputeType_t compute;
  bool trans_a;
  bool trans_b;
  int64_t m, n, k;
  int64_t lda, ldb, ldd;
  cublasLtEpilogue_t epilogue;
  int64_t ld_aux;  // the aux matrix (GELU_AUX: the pre-activation), or 0
};

struct Pointers {
  const void* a;
  const void* b;
  void* d;
  const void* bias;  // or null
  void* aux;  // or null
};

inline uint32_t alignment_of(const void* p) {
  if (p == nullptr) {
    return 256;
  }
  uint32_t align = 256;
  const auto address = reinterpret_cast<uintptr_t>(p);
  while (align > 1 && address % align != 0) {
    align /= 2;
  }
  return align;
}

struct Key {
  std::array<int64_t, 16> v;
  bool operator==(const Key& other) const { return v == other.v; }
};

struct KeyHash {
  size_t operator()(const Key& key) const {
    size_t h = 1469598103934665603ull;
    for (int64_t x : key.v) {
      h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    }
    return h;
  }
};

struct Choice {
  bool found;
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
};

class Descriptors {
 public:
  Descriptors(const Gemm& g, const Pointers& p, const char* op) : op_(op) {
    const cudaDataType_t scale = g.compute == CUBLAS_COMPUTE_64F ? CUDA_R_64F : CUDA_R_32F;
    WHEELOPS_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&desc_, g.compute, scale), op);
    const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    set(CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof(g.epilogue));
    if (p.bias != nullptr) {
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias));
    }
    if (p.aux != nullptr) {
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p.aux, sizeof(p.aux));
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &g.ld_aux, sizeof(g.ld_aux));
    }
    // Stored shapes: op(A) is m x k, so A is k x m when transposed.
    layout(&a_, g.type, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda);
    layout(&b_, g.type, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb);
    layout(&d_, g.type, g.m, g.n, g.ldd);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    for (cublasLtMatrixLayout_t l : {a_, b_, d_}) {
      if (l != nullptr) {
        cublasLtMatrixLayoutDestroy(l);
      }
    }
    if (desc_ != nullptr) {
      cublasLtMatmulDescDestroy(desc_);
    }
  }

  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;

 private:
  void set(cublasLtMatmulDescAttributes_t attr, const void* value, size_t size) {
    WHEELOPS_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(desc_, attr, value, size), op_);
  }
  void layout(
      cublasLtMatrixLayout_t* l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
    WHEELOPS_CUBLASLT_CHECK(
        cublasLtMatrixLayoutCreate(
            l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
        op_);
  }
  const char* op_;
};

// The algorithm cuBLASLt's heuristic ranks first for this GEMM, cached; `found` is
// false where cuBLASLt has none (an epilogue it does not support for this dtype,
// layout or alignment): the caller then takes another way.
inline Choice choose(
    const Gemm& g, const Pointers& p, const Descriptors& d, cublasLtHandle_t h, int32_t device,
    const char* op) {
  const uint32_t align_a = alignment_of(p.a), align_b = alignment_of(p.b);
  const uint32_t align_d = alignment_of(p.d);
  const uint32_t align_e = std::min(alignment_of(p.bias), alignment_of(p.aux));
  const Key key{{int64_t{g.type}, int64_t{g.compute}, g.trans_a, g.trans_b, g.m, g.n, g.k,
                 g.lda, g.ldb, g.ldd, int64_t{g.epilogue}, g.ld_aux, device,
                 int64_t{align_a} << 32 | align_b, int64_t{align_d} << 32 | align_e,
                 (p.bias != nullptr) | (p.aux != nullptr) << 1}};
  static std::mutex mutex;
  static std::unordered_map<Key, Choice, KeyHash> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = cache.find(key);
    if (it != cache.end()) {
      return it->second;
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  WHEELOPS_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref), op);
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* v, size_t n) {
    WHEELOPS_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, v, n), op);
  };
  set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kMaxWorkspaceBytes, sizeof(kMaxWorkspaceBytes));
  // Split-K partial sums stay in the compute type (float32), never the output type: the
  // accuracy the tests derive is that of one float32-accumulated GEMM.
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_INPLACE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d));
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      h, d.desc_, d.a_, d.b_, d.d_, d.d_, pref, 1, &result, &returned);
  Choice choice{false, {}, 0};
  if (status == CUBLAS_STATUS_SUCCESS && returned > 0) {
    choice = {true, result.algo, result.workspaceSize};
  } else {
    WHEELOPS_CHECK(
        status == CUBLAS_STATUS_SUCCESS || status == CUBLAS_STATUS_NOT_SUPPORTED, "wheelops.",
        op, ": cuBLASLt cublasLtMatmulAlgoGetHeuristic failed: ", status_name(status), " (",
        cublasLtGetStatusString(status), ")");
  }
  std::lock_guard<std::mutex> lock(mutex);
  cache.emplace(key, choice);
  return choice;
}

// Runs the GEMM on `stream`; false (nothing launched) where cuBLASLt has no algorithm
// for it. `like` places the workspace (torch's allocator, the device of the GEMM).
inline bool try_matmul(
    const Gemm& g, const Pointers& p, const Tensor& like, int32_t device, cudaStream_t stream,
    const char* op) {
  const cublasLtHandle_t h = handle(device, op);
  const Descriptors d(g, p, op);
  const Choice choice = choose(g, p, d, h, device, op);
  if (!choice.found) {
    return false;
  }
  // Most algorithms need none: then no allocation (a few microseconds of host time a call).
  std::optional<Tensor> workspace;
  if (choice.workspace > 0) {
    workspace = allocate(like, {static_cast<int64_t>(choice.workspace)}, ScalarType::Byte);
  }
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool wide = g.compute == CUBLAS_COMPUTE_64F;
  const void* alpha = wide ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* beta = wide ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  WHEELOPS_CUBLASLT_CHECK(
      cublasLtMatmul(
          h, d.desc_, alpha, p.a, d.a_, p.b, d.b_, beta, p.d, d.d_, p.d, d.d_, &choice.algo,
          workspace ? workspace->mutable_data_ptr() : nullptr, choice.workspace, stream),
      op);
  return true;
}

// try_matmul, where a GEMM without an epilogue must always have an algorithm.
inline void matmul(
    const Gemm& g, const Pointers& p, const Tensor& like, int32_t device, cudaStream_t stream,
    const char* op) {
  WHEELOPS_CHECK(
      try_matmul(g, p, like, device, stream, op), "wheelops.", op,
      ": cuBLASLt has no algorithm for a ", g.m, " x ", g.n, " x ", g.k,
      " GEMM of this dtype and alignment (cublasLtMatmulAlgoGetHeuristic found none)");
}

} // namespace wheelops::cublaslt
