#!/bin/bash
# The standalone harness of issue 27 (see ../README.md): builds each micro_*.cu with the
# machine's nvcc against this checkout's kernels and torch's headers, and runs it.
#   bash benchmarks/results/h100-2026-11-26-issue27/harness/run.sh [elem norm gelu softmax silu]
# The micro_gelu, micro_softmax and micro_silu files include the op's .cu file with its
# registration macro turned into an unused function, and time its kernels directly.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
TD=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))")
NV="nvcc -std=c++17 -O3 -arch=sm_90 -DUSE_CUDA -DTORCH_TARGET_VERSION=0x020a000000000000 -I$repo/csrc/include -I$repo/csrc/ops -I$TD/include"
export LD_LIBRARY_PATH=$TD/lib:${LD_LIBRARY_PATH:-}
progs="${*:-elem norm gelu softmax silu}"
for p in $progs; do
  $NV "$here/micro_$p.cu" -o "/tmp/micro_$p" -L"$TD/lib" -ltorch_cpu -lc10 || exit 1
done
for p in $progs; do echo "=== $p"; "/tmp/micro_$p"; done
