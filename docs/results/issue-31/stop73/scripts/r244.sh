#!/bin/bash
# Round 244 (H200): round 243 with forms whose exps are exp2 of a scaled argument (ex2.approx), to see
# whether the consumers arithmetic bounds the kernel. Run from the repository root.
set -u
R=$OUT/r244
mkdir -p $R
for s in 16384x32768 4096x131072 32768x4096 8192x65536; do
  timeout 90 exp73/tma_rows ${s%x*} ${s#*x} 10 > $R/tma_$s.txt 2>&1; echo "tma $s exit $?" >> $R/tma_$s.txt
  tail -2 $R/tma_$s.txt
done
timeout 200 exp73/new/lossjit_bench --rows --reps 10 --examples examples --only "cross_entropy 32768x4096" --only "cross_entropy 16384x32768" \
  --only "cross_entropy 4096x131072" --variant row_cache=auto --variant fast_math=on > $R/lossjit_rows.txt 2>&1
echo "exit $?" >> $R/lossjit_rows.txt
grep "knobs\|floor_fraction\"\|exit" $R/lossjit_rows.txt
