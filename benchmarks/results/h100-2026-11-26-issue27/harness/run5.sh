#!/bin/bash
cd "$(dirname "$0")"
TD=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))")
/usr/local/cuda/bin/nvcc -std=c++17 -O3 -arch=sm_90 -DUSE_CUDA -DTORCH_TARGET_VERSION=0x020a000000000000 -I../../csrc/include -I../../csrc/ops -I$TD/include micro_lnlong.cu -o /tmp/micro_lnlong && /tmp/micro_lnlong
