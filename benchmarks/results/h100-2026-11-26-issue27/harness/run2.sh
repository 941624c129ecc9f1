#!/bin/bash
# Harness round 2: softmax configs at more shapes; the norm forward under forced register budgets.
cd "$(dirname "$0")"
TD=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))")
NV="/usr/local/cuda/bin/nvcc -std=c++17 -O3 -arch=sm_90 -DUSE_CUDA -DTORCH_TARGET_VERSION=0x020a000000000000 -I../../csrc/include -I../../csrc/ops -I. -I$TD/include"
export LD_LIBRARY_PATH=$TD/lib:${LD_LIBRARY_PATH:-}
sed 's/__launch_bounds__(kMaxThreads) forward_registers_kernel/__launch_bounds__(512, MINB) forward_registers_kernel/' ../../csrc/ops/norm_cuda.cuh > norm_lb.cuh
grep -c "MINB" norm_lb.cuh
$NV micro_softmax.cu -o /tmp/micro_softmax -L$TD/lib -ltorch_cpu -lc10 &
for mb in 1 2 3 4; do $NV -DMINB=$mb micro_norm2.cu -o /tmp/micro_norm2_$mb -Xptxas -v 2> /tmp/ptxas_$mb.log & done; wait
for mb in 1 2 3 4; do grep -A1 "forward_registers" /tmp/ptxas_$mb.log | grep -o "Used [0-9]* registers.*" | sort | uniq -c | head -3; done
echo "=== softmax"; timeout 100 /tmp/micro_softmax
for mb in 1 2 3 4; do echo "=== norm MINB $mb"; timeout 60 /tmp/micro_norm2_$mb; done
