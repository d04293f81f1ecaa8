#!/bin/bash
# Builds exp78/ as rounds 270-271 ran it (round 271's harness; round 269's timed N and C alone and
# profiled N only, round 270's N, Nb and C: harness.cu's header), and harness274 for r274.sh. From
# the repository root, with build/lossjit built (the printed kernel must be main's at this stop:
# make_variants.py stops where its edits do not apply), nvcc 13.0. Carry exp78 then.
set -e
mkdir -p exp78 && cd exp78
S=../docs/results/issue-31/stop78/scripts
cp $S/{harness.cu,make_variants.py,sass_lines.py,r269.sh,r270.sh,r271.sh,r272.sh,r274.sh} ../docs/results/issue-31/stop62/scripts/ncu_rows.py .
../build/lossjit emit ../examples/cross_entropy.loss -i x=16384x32768:normal -i y=16384:integers[0,32767]:i64 --grad x --gpu h200 |
  sed 's/^#ifdef __CUDACC_RTC__$/#if defined(__CUDACC_RTC__) || defined(LJ_NVCC_DEVICE)/' > ce_now.cuh
python3 make_variants.py
# ptxas: N, Nb and C 64 registers, no spills; Ns, Nq 48 bytes of spill stores, Nx 36, Nd 36 (not
# timed); Nc and Ne no spills.
nvcc -O3 -lineinfo -arch=sm_90 -std=c++17 -DLJ_NVCC_DEVICE -Xcompiler -fpermissive -Xptxas -v -o harness harness.cu tu_nb.cu tu_ns.cu tu_nq.cu
# Round 274's (prepared, not run): N, Nc, Ne, C.
nvcc -O3 -lineinfo -arch=sm_90 -std=c++17 -DLJ_NVCC_DEVICE -DROUND274 -Xcompiler -fpermissive -Xptxas -v -o harness274 harness.cu tu_nc.cu tu_ne.cu
