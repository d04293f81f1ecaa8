#!/bin/bash
# Round 188 (stop 62, H200). (1) The harness at 16384 x 32768 and 16384 x 32000: the fused
# cross-entropy's printed copies kernel (A), the printed walk ahead P0, P5, P6, P7 and the hand-written
# B and C (P7: P6 with the row's index loaded by the row before, into Ahead, as C loads it; p7_edit.py
# makes it of P6). (2) The fused row programs through the library as committed (exp62/head) and with
# stop 61's p5_printer.patch on the committed printer and ByRowWalkAheadMaxThreads' row at 1024
# (exp62/ahead7: prints P7 for the cross-entropy), in turn. (3) Nsight Compute on one launch each of A,
# P6, P7 and C at 16384 x 32768, and the harness's SASS.
# Build here first (from the repository root; exp61/ as ../../stop61/scripts/build.sh leaves it):
# mkdir -p exp62 && cp exp61/{ce_emitted.cuh,k_p*.cuh,tu_p*.cu} exp62/ && cp
# docs/results/issue-31/stop62/scripts/{harness.cu,p7_edit.py} exp62/ && cd exp62 && python3 p7_edit.py &&
# nvcc -O3 -lineinfo -arch=sm_90 -std=c++17 -DLJ_NVCC_DEVICE -Xcompiler -fpermissive -o harness
# harness.cu tu_p0.cu tu_p5.cu tu_p6.cu tu_p7.cu; the two libraries' liblossjit_c.so.1.0 into
# exp62/head/ and exp62/ahead7/. Carry exp62/harness, exp62/head/liblossjit_c.so.1.0,
# exp62/ahead7/liblossjit_c.so.1.0.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
(for s in "16384 32768" "16384 32000"; do timeout 100 exp62/harness $s; done) > $OUT/harness.txt 2>&1
ln -sf liblossjit_c.so.1.0 exp62/head/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp62/ahead7/liblossjit_c.so.1
for s in 16384x32768 16384x32000; do
  for lib in head ahead7 head ahead7; do
    echo "== $s library $lib"
    LOSSJIT_LIBRARY=$PWD/exp62/$lib/liblossjit_c.so.1 timeout 50 python3 bench/row_variants.py --shape $s --reps 10 \
      --only cross-entropy --only "label smoothing" --only "class weights" --only "loss, z and accuracy" --only focal
  done
done > $OUT/programs.txt 2>&1
cuobjdump --dump-sass exp62/harness > $OUT/harness.sass 2>&1
LJ_PROFILE=1 timeout 170 ncu --clock-control none -k 'regex:lossjit_kernel$|lossjit_kernel_p[67]|early_kernel' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
  --section InstructionStats --section Occupancy --section LaunchStats --section SourceCounters \
  -o $OUT/r188 exp62/harness 16384 32768 > $OUT/ncu_run.txt 2>&1
ncu -i $OUT/r188.ncu-rep --print-details all > $OUT/ncu.txt 2>&1
ncu -i $OUT/r188.ncu-rep --page source --csv --print-source sass > $OUT/source.csv 2>&1
ls -la $OUT
