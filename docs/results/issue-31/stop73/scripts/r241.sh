#!/bin/bash
# Round 241 (H200): the GPU tests stop 72 left unrun (the registers knob at its extremes; the
# several-input row reductions), then cross-entropy's value + gradient brought on chip by bulk copies
# (tma_rows.cu, every variant that fits, each shape) beside lossjit's default in the same call, then
# stop 72's sweep of the register bound. Build first; exp73/new holds build/tests/lossjit_tests,
# build/bench/lossjit_bench and exp73/tma_rows (nvcc -O3 -arch=sm_90 -std=c++17). Run from the
# repository root.
set -u
R=$OUT/r241
mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt
LOSSJIT_SOURCE_DIR=$PWD timeout 120 exp73/new/lossjit_tests -tc="knobs at their extremes*,row programs: reductions of several inputs*" > $R/tests.txt 2>&1
echo "exit $?" >> $R/tests.txt
tail -3 $R/tests.txt
for s in 4096x131072 16384x32768 32768x4096 8192x65536; do
  timeout 60 exp73/tma_rows ${s%x*} ${s#*x} 10 > $R/tma_$s.txt 2>&1; echo "tma $s exit $?" >> $R/tma_$s.txt
  tail -2 $R/tma_$s.txt
done
timeout 120 exp73/new/lossjit_bench --rows --reps 10 --examples examples --only "cross_entropy 32768x4096" --only "cross_entropy 16384x32768" \
  --only "cross_entropy 4096x131072" > $R/lossjit_ce.txt 2>&1
echo "exit $?" >> $R/lossjit_ce.txt
grep -i "floor\|exit" $R/lossjit_ce.txt
timeout 200 exp73/new/lossjit_bench --rows --reps 10 --examples examples --variant registers=auto --variant registers=255 \
  --variant registers=64 > $R/registers.txt 2>&1
echo "exit $?" >> $R/registers.txt
