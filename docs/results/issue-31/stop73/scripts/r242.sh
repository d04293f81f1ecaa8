#!/bin/bash
# Round 242 (H200): tma_rows.cu's second form (a thread's items of a chunk reduced as one tile; the
# block's partial merged by every warp) at each shape, lossjit's default in the same call. exp73/tma_rows
# built from tma_rows.cu as in r241.sh. Run from the repository root.
set -u
R=$OUT/r242
mkdir -p $R
for s in 16384x32768 4096x131072 32768x4096 8192x65536; do
  timeout 90 exp73/tma_rows ${s%x*} ${s#*x} 10 > $R/tma_$s.txt 2>&1; echo "tma $s exit $?" >> $R/tma_$s.txt
  tail -2 $R/tma_$s.txt
done
timeout 120 exp73/new/lossjit_bench --rows --reps 10 --examples examples > $R/lossjit_rows.txt 2>&1
echo "exit $?" >> $R/lossjit_rows.txt
grep "value+grad\|exit" $R/lossjit_rows.txt
