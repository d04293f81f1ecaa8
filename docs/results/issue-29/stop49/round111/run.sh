#!/bin/bash
# Round 111 (to run before `centered-merge` lands): the equal-means fix of lj::CenteredAcc's
# one-division merge on the GPU. Build the branch here, copy main's library and CLI (the
# six-division merge) to build/main-bin/, carry build/{src/capi/liblossjit_c.so.1.0,lossjit,
# tests/lossjit_tests,main-bin}. First the GPU cases that run the accumulator (the squared
# deviations case failed in round 110) and the random programs, side by side; then, on the quiet
# GPU, the CLI's layer norm forward and round 109's short_rows.py / few_rows.py with main's library
# and the branch's, alternating by process.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
mkdir -p build/new-bin && cp build/src/capi/liblossjit_c.so.1.0 build/new-bin/
R=docs/results/issue-29/stop49
mkdir -p /tmp/r111; nvidia-smi --query-gpu=name --format=csv,noheader
i=0
for T in '*squared deviations*' '*group norm*' '*fused value and gradients*' '*gradients of maps that reduce*' '*along other dimensions*' '*reductions match the reference in every team*'; do
  i=$((i+1)); (timeout 300 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > /tmp/r111/case$i.txt 2>&1; echo "rc $? $T" >> /tmp/r111/case$i.txt) &
done
(export LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0; timeout 300 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 111 --time-limit 200 --log /tmp/r111/diff.txt > /tmp/r111/diff_out.txt 2>&1) &
wait
cat /tmp/r111/*.txt > $OUT/all.txt
for f in /tmp/r111/case*.txt; do grep -E "ERROR|MESSAGE|rc |test cases|assertions" $f | head -8; done
head -2 /tmp/r111/diff_out.txt; grep -A3 "fails" /tmp/r111/diff_out.txt | head -8; tail -1 /tmp/r111/diff_out.txt
LN='m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)'
for S in 16384x8192 32768x4096; do for B in build/main-bin/lossjit build/lossjit; do echo "$B $S"; $B bench "$LN" -q -i x=$S:normal --reps 10 --sets 1 --sweep block=256,512,1024 -k row_cache=on 2>&1 | tail -4; done; done
for L in new main new main; do
  X=""; [ $L = new ] && [ -z "$DONE" ] && X=--reference && DONE=1
  LOSSJIT_LIBRARY=$PWD/build/$L-bin/liblossjit_c.so.1.0 timeout 170 python3 -u $R/round109/short_rows.py $L $X 2>&1 | grep "^("
  echo "$L few_rows"; LOSSJIT_LIBRARY=$PWD/build/$L-bin/liblossjit_c.so.1.0 timeout 100 python3 -u bench/few_rows.py --reps 10 --only layer_norm 2>&1 | grep -v -i warn | tail -3
done
