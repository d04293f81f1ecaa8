#!/bin/bash
# Round 113 (H100): a block a row of automatic size takes the fewest threads (from 128) that keep
# 64 KB of loads in flight an SM (ByRowBlockTeamMinThreads), the knob row_team, and round 112's
# butterfly, against main before both (build/main-bin). Carry build/{src/capi/liblossjit_c.so.1.0,
# lossjit,tests/lossjit_tests,main-bin,new-bin}. First the GPU cases of the row programs (the row
# team asked for both ways among them) and random programs, side by side; then timing on the quiet
# GPU, the libraries alternating by process.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
R=docs/results/issue-29/stop50/round113
mkdir -p /tmp/r; nvidia-smi --query-gpu=name --format=csv,noheader
i=0
for T in '*squared deviations*' '*fused value and gradients*' '*gradients of maps that reduce*' '*reductions match the reference in every team*' '*along other dimensions*' '*class-weight*' '*K indices per row*'; do
  i=$((i+1)); (timeout 220 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > /tmp/r/case$i.txt 2>&1; echo "rc $? $T" >> /tmp/r/case$i.txt) &
done
(export LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0; timeout 220 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 113 --time-limit 170 --log /tmp/r/diff.txt > /tmp/r/diff_out.txt 2>&1) &
wait
for f in /tmp/r/case*.txt; do grep -E "ERROR|rc |test cases|assertions" $f | head -6; done
head -2 /tmp/r/diff_out.txt; grep -A3 "fails" /tmp/r/diff_out.txt | head -8; tail -1 /tmp/r/diff_out.txt
SM='exp(x - logsumexp(x, -1))'
for B in main new; do
  echo "$B softmax 16384x8192, 8192x16384, 4096x32768"; for S in 16384x8192 8192x16384 4096x32768; do build/$B-bin/lossjit bench "$SM" -q -i x=$S:normal --reps 10 --sets 1 2>&1 | tail -1; done
done
for k in 1 2; do
  X=""; [ $k = 1 ] && X=--reference
  LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0 timeout 80 python3 -u $R/rows.py new default $X 2>&1 | grep "^("
  LOSSJIT_LIBRARY=$PWD/build/main-bin/liblossjit_c.so.1.0 timeout 60 python3 -u $R/rows.py main default 2>&1 | grep "^("
done
SHAPES="8192x16384 4096x32768" LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0 timeout 50 python3 -u $R/rows.py new default 2>&1 | grep "^("
SHAPES="8192x16384 4096x32768" LOSSJIT_LIBRARY=$PWD/build/main-bin/liblossjit_c.so.1.0 timeout 50 python3 -u $R/rows.py main default 2>&1 | grep "^("
