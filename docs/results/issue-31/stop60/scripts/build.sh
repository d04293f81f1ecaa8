#!/bin/bash
# Builds the harness (rounds 180-182) and round 182's bisect in exp60/ from the repository root. The walk ahead at 1024 threads is printed only with ByRowWalkAheadMaxThreads'
# row (src/codegen/kinds/defaults.cpp) set to 1024 in the build that prints it: AHEAD=that lossjit;
# COPIES=the committed lossjit (the copies kernel, A).
set -e
S=$PWD/docs/results/issue-31/stop60/scripts
AHEAD=$(realpath "$AHEAD"); COPIES=$(realpath "$COPIES")
mkdir -p exp60 && cd exp60
emit() { "$1" emit ../examples/cross_entropy.loss -i x=16384x32768:normal -i y=16384:integers[0,32767]:i64 --grad x --gpu h200 -k row_prefetch=on; }
# nvcc compiles the NVRTC source as device code (the ABI's functions are host functions otherwise).
device() { sed 's/^#ifdef __CUDACC_RTC__$/#if defined(__CUDACC_RTC__) || defined(LJ_NVCC_DEVICE)/'; }
emit "$COPIES" | device > ce_emitted.cuh
emit "$AHEAD" | device > ce_ahead.cu
cp ce_ahead.cu p0.cu
for v in p1 p2 p3 p4 q1 q2; do cp ce_ahead.cu $v.cu && patch -s $v.cu < $S/$v.patch; done
for v in p0 p1 p2 p3 p4 q1 q2; do
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
flags="-O3 -arch=sm_90 -std=c++17 -DLJ_NVCC_DEVICE -Xcompiler -fpermissive"
cp $S/harness.cu $S/bisect.cu .
nvcc $flags -o harness harness.cu tu_p0.cu tu_p1.cu tu_p2.cu tu_p3.cu tu_p4.cu tu_q1.cu tu_q2.cu
nvcc $flags -o bisect bisect.cu
