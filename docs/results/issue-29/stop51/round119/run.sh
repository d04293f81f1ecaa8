#!/bin/bash
# Round 119 (H100): a walk's accumulators merged as one pack (Team::all_reduce_each) against main
# before it (build/main-bin). Carry build/{src/capi/liblossjit_c.so.1.0,tests/lossjit_tests,main-bin,
# new-bin}. The row programs' GPU cases and random programs side by side; then the gradient kernels
# alone and the forwards (round117/grad_sweep.py), and forward + backward (stop50/round113/rows.py),
# the libraries alternating by process.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
mkdir -p /tmp/r; nvidia-smi --query-gpu=name --format=csv,noheader
i=0
for T in '*squared deviations*' '*fused value and gradients*' '*gradients of maps that reduce*' '*reductions match the reference in every team*' '*along other dimensions*' '*class-weight*' '*K indices per row*'; do
  i=$((i+1)); (timeout 220 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > /tmp/r/case$i.txt 2>&1; echo "rc $? $T" >> /tmp/r/case$i.txt) &
done
(export LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0; timeout 220 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 119 --time-limit 170 --log /tmp/r/diff.txt > /tmp/r/diff_out.txt 2>&1) &
wait
for f in /tmp/r/case*.txt; do grep -E "ERROR|rc |test cases|assertions" $f | head -6; done
head -2 /tmp/r/diff_out.txt; grep -A3 "fails" /tmp/r/diff_out.txt | head -8; tail -1 /tmp/r/diff_out.txt
for k in 1 2; do
  for B in new main; do
    SHAPES="32768x4096 16384x8192" LOSSJIT_LIBRARY=$PWD/build/$B-bin/liblossjit_c.so.1.0 timeout 60 python3 -u docs/results/issue-29/stop51/round117/grad_sweep.py default 2>&1 | grep "^(" | sed "s/^/$B /"
  done
done
for k in 1 2; do
  X=""; [ $k = 1 ] && X=--reference
  SHAPES="32768x4096 16384x8192" LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0 timeout 80 python3 -u docs/results/issue-29/stop50/round113/rows.py new default $X 2>&1 | grep "^("
  SHAPES="32768x4096 16384x8192" LOSSJIT_LIBRARY=$PWD/build/main-bin/liblossjit_c.so.1.0 timeout 60 python3 -u docs/results/issue-29/stop50/round113/rows.py main default 2>&1 | grep "^("
done
