#!/bin/bash
# Round 187 (prepared at stop 61, for the next H200): the bisection on top of stop 61's printer. Build
# here first: mkdir -p exp61 && build/lossjit emit examples/cross_entropy.loss -i x=16384x32768:normal
# -i y=16384:integers[0,32767]:i64 --grad x --gpu h200 -k row_prefetch=on | sed 's/^#ifdef
# __CUDACC_RTC__$/#if defined(__CUDACC_RTC__) || defined(LJ_NVCC_DEVICE)/' > exp61/ce_emitted.cuh &&
# nvcc -O3 -arch=sm_90 -std=c++17 -DLJ_NVCC_DEVICE -Xcompiler -fpermissive -I exp61 -o exp61/bisect
# docs/results/issue-31/stop61/scripts/bisect.cu; carry exp61/bisect.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
(for s in "16384 32768" "16384 32000"; do timeout 200 exp61/bisect $s; done) > $OUT/bisect.txt 2>&1
