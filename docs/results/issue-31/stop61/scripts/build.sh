#!/bin/bash
# Builds round 183's harness in exp61/ from the repository root. The walk ahead at 1024 threads is
# printed only with ByRowWalkAheadMaxThreads' row (src/codegen/kinds/defaults.cpp) at 1024:
# P0=a lossjit of stop 60's printer so built, P5 and P6 of stop 61's (P5: p5_printer.patch on stop
# 60's; P6: the printer as committed), COPIES=the committed lossjit (A).
set -e
S=$PWD/docs/results/issue-31/stop61/scripts
P0=$(realpath "$P0"); P5=$(realpath "$P5"); P6=$(realpath "$P6"); COPIES=$(realpath "$COPIES")
mkdir -p exp61 && cd exp61
emit() { "$1" emit ../examples/cross_entropy.loss -i x=16384x32768:normal -i y=16384:integers[0,32767]:i64 --grad x --gpu h200 -k row_prefetch=on; }
# nvcc compiles the NVRTC source as device code (the ABI's functions are host functions otherwise).
device() { sed 's/^#ifdef __CUDACC_RTC__$/#if defined(__CUDACC_RTC__) || defined(LJ_NVCC_DEVICE)/'; }
emit "$COPIES" | device > ce_emitted.cuh
emit "$P0" | device > p0.cu
emit "$P5" | device > p5.cu
emit "$P6" | device > p6.cu
for v in p0 p5 p6; do
  sed "s/lossjit_kernel(/lossjit_kernel_$v(/" $v.cu > k_$v.cuh
  cat > tu_$v.cu <<TU
#include "k_$v.cuh"
#include <cuda_runtime.h>
void launch_$v(int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
               const lj::Grads<1>& gr) {
    static bool set = false;
    if (!set) { cudaFuncSetAttribute(lossjit_kernel_$v, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem); set = true; }
    lossjit_kernel_$v<<<grid, block, smem>>>(ex, in, out, gr);
}
TU
done
cp $S/harness.cu .
nvcc -O3 -arch=sm_90 -std=c++17 -DLJ_NVCC_DEVICE -Xcompiler -fpermissive -o harness harness.cu tu_p0.cu tu_p5.cu tu_p6.cu
