#!/bin/bash
cd "$(dirname "$0")"
TD=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))")
NV="/usr/local/cuda/bin/nvcc -std=c++17 -O3 -arch=sm_90 -DUSE_CUDA -DTORCH_TARGET_VERSION=0x020a000000000000 -I../../csrc/include -I../../csrc/ops -I. -I$TD/include"
export LD_LIBRARY_PATH=$TD/lib:${LD_LIBRARY_PATH:-}
for p in gelu3 silubwd; do $NV micro_$p.cu -o /tmp/micro_$p -L$TD/lib -ltorch_cpu -lc10 & done; wait
for p in gelu3 silubwd; do echo "=== $p"; timeout 100 /tmp/micro_$p; done
