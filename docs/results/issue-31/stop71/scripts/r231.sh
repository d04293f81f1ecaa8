#!/bin/bash
# Round 231 (H200): round 230's split rows again with the data made and checked on the GPU (round 230's
# host-side check ran its shapes past their time limits), the row cache left out (L2), and lossjit's
# default beside (main's library). One file, r231/all.txt. Run from the repository root.
set -u
R=$OUT/r231
mkdir -p $R
for s in 4096x131072 8192x65536 4096x128256 2048x262144 16384x32768; do
  N=${s%x*}; C=${s#*x}
  timeout 60 exp71/split_rows $N $C 10 >> $R/all.txt 2>&1; echo "split $s exit $?" >> $R/all.txt
done
for s in 4096x131072 16384x32768; do
  LOSSJIT_LIBRARY=$PWD/exp71/main/liblossjit_c.so.1 timeout 60 python3 -u bench/row_variants.py --shape $s --only cross-entropy --reps 10 >> $R/all.txt 2>&1
done
