#!/bin/bash
# regs.sh FILE: registers and spills of lossjit_kernel
nvcc -O3 -arch=sm_90 -std=c++17 -DLJ_NVCC_DEVICE -Xcompiler -fpermissive -cubin -Xptxas -v -o /tmp/k.cubin "$1" 2>&1 | grep -E "registers|spill" | grep -A0 -B1 registers | tr '\n' ' ' ; echo
