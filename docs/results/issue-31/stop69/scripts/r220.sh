#!/bin/bash
# Round 220 (stop 69, H200): stop 62's P12 printer (the take of a cached input picked out of the walk
# ahead, the row's index loaded a row ahead; rebased onto main) with ByRowWalkAheadMaxThreads at
# 1024 (exp69/p12w), against main (exp69/main): bench/row_variants.py with each library in turn,
# three times, the cross-entropy family's value + gradient at two shapes of a block alone on its SM
# (z-loss and accuracy keeps the copies in both: not walked ahead).
# Carry exp69 (main: lossjit, lossjit_bench, liblossjit_c.so.1.0; p12w: the same and lossjit_tests;
# c: warm220.sh's kernels).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
cp -r exp69/c /tmp/c
export LOSSJIT_CACHE_DIR=/tmp/c
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
for v in main p12w; do ln -sf liblossjit_c.so.1.0 exp69/$v/liblossjit_c.so.1; done
source docs/results/issue-31/stop69/scripts/variants220.sh
only=(--only cross-entropy --only "class weights" --only "label smoothing" --only focal)
for round in 1 2 3; do
  for s in 16384x32768 16384x32000; do
    for v in main p12w; do
      echo "== round $round $s $v"
      LOSSJIT_LIBRARY=$PWD/exp69/$v/liblossjit_c.so.1 timeout 40 python3 bench/row_variants.py --shape $s "${only[@]}" --reps 10 2>&1
    done
  done
done > $OUT/family.txt 2>&1
grep -E "==|of floor|rror" $OUT/family.txt
