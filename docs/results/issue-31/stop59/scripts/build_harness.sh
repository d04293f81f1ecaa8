#!/bin/bash
# Builds harness (scripts/harness.cu) and bounds (scripts/bounds.cu) in exp59/, as rounds 173-177 ran them
# (round 177's form). ce_emitted.cuh is HEAD's (2ac28cd) cross-entropy value + gradient kernel as an H200
# runs it ("A"), the k_*.cuh the change's ("D") at 1024 x 4 (its choice before the threads rule), and
# the same source at 512 x 4 and 512 x 8. Run from the repository root: OLD=path/to/HEAD's/lossjit NEW=build/lossjit.
# Since the threads rule (ByRowWalkAheadMaxThreads, 512) the change walks ahead at 1024 threads no more:
# to print D again, set that default's row in src/codegen/kinds/defaults.cpp to 1024 for NEW's build.
set -e
mkdir -p exp59 && cd exp59
cp ../docs/results/issue-31/stop59/scripts/{harness.cu,bounds.cu} .
emit() { "$1" emit ../examples/cross_entropy.loss -i x=16384x32768:normal -i y=16384:integers[0,32767]:i64 --grad x --gpu h200 -k row_prefetch=on; }
# nvcc compiles the NVRTC source as device code (the ABI's functions are host functions otherwise).
device() { sed 's/^#ifdef __CUDACC_RTC__$/#if defined(__CUDACC_RTC__) || defined(LJ_NVCC_DEVICE)/'; }
emit "$OLD" | device > ce_emitted.cuh
emit "$NEW" | device > ce_ahead.cuh
sed 's/__launch_bounds__(1024)/__launch_bounds__(512)/; s/lj::Team<1024, 1024>/lj::Team<512, 512>/; s/finish_totals<1024,/finish_totals<512,/' ce_ahead.cuh > v512.cuh
sed 's/row<Team, 2, 4, 4>/row<Team, 2, 4, 8>/; s/Ahead<4, 4> ahead/Ahead<8, 4> ahead/; s/first_walk<Team, 2, 4, 4>/first_walk<Team, 2, 4, 8>/' v512.cuh > v512u8.cuh
for v in ahead:ce_ahead.cuh a512:v512.cuh a512u8:v512u8.cuh; do
  name=${v%%:*}; file=${v#*:}
  sed "s/lossjit_kernel(/lossjit_kernel_$name(/" $file > k_$name.cuh
  cat > tu_$name.cu <<TU
#include "k_$name.cuh"
#include <cuda_runtime.h>
void launch_$name(int grid, int block, size_t smem, const lj::Extents& ex, const lj::Inputs<2>& in, const lj::RowsOut& out,
                  const lj::Grads<1>& gr) {
    static bool set = false;
    if (!set) {
        cudaFuncSetAttribute(lossjit_kernel_$name, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        set = true;
    }
    lossjit_kernel_$name<<<grid, block, smem>>>(ex, in, out, gr);
}
TU
done
flags="-O3 -arch=sm_90 -std=c++17 -DLJ_NVCC_DEVICE -Xcompiler -fpermissive"
nvcc $flags -o harness harness.cu tu_ahead.cu tu_a512.cu tu_a512u8.cu
nvcc -O3 -arch=sm_90 -std=c++17 -o bounds bounds.cu
