#!/bin/bash
# Round 243 (H200): tma_rows.cu as round 242 with a proxy fence before a slot is handed back (round
# 242 saw one gradient off by 5.6e-8 in one variant), the gradient checked after the timed launches
# too, the warp forms given more slots than warps (round 242's R < W form faulted), more warp forms;
# lossjit's default in the same call. Run from the repository root.
set -u
R=$OUT/r243
mkdir -p $R
for s in 16384x32768 4096x131072 32768x4096 8192x65536; do
  timeout 90 exp73/tma_rows ${s%x*} ${s#*x} 10 > $R/tma_$s.txt 2>&1; echo "tma $s exit $?" >> $R/tma_$s.txt
  tail -2 $R/tma_$s.txt
done
timeout 120 exp73/new/lossjit_bench --rows --reps 10 --examples examples > $R/lossjit_rows.txt 2>&1
echo "exit $?" >> $R/lossjit_rows.txt
grep "value+grad\|exit" $R/lossjit_rows.txt
