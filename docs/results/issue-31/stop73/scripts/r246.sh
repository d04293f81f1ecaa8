#!/bin/bash
# Round 246 (H200): tma_rows.cu with the form whose ring is the row cache and which has no producer
# warp (the last warp out of a chunk copies the next row's chunk in), beside rounds 243-245's forms;
# lossjit's default and fast_math in the same call. Run from the repository root.
set -u
R=$OUT/r246
mkdir -p $R
for s in 16384x32768 8192x65536 4096x131072; do
  timeout 90 exp73/tma_rows ${s%x*} ${s#*x} 10 1 > $R/tma_$s.txt 2>&1; echo "tma $s exit $?" >> $R/tma_$s.txt
  grep "ring=cache" $R/tma_$s.txt | sort -t'%' -k1 | tail -3
  tail -2 $R/tma_$s.txt
done
timeout 200 exp73/new/lossjit_bench --rows --reps 10 --examples examples --only "cross_entropy 16384x32768" \
  --only "cross_entropy 4096x131072" --variant row_cache=auto --variant fast_math=on > $R/lossjit_rows.txt 2>&1
echo "exit $?" >> $R/lossjit_rows.txt
grep "knobs\|value_and_grad_ms\|floor_fraction\"\|exit" -A2 $R/lossjit_rows.txt | grep -v "^--" | head -40
