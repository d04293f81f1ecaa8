#!/bin/bash
# Round 232 (H200): split rows with a merge warp (split_ce4, "v4") against rounds 230-231's best forms
# and lossjit's default (main's library), one file, r232/all.txt. Run from the repository root.
set -u
R=$OUT/r232
mkdir -p $R
for pass in 1 2; do
  for s in 4096x131072 16384x32768 8192x65536 2048x262144; do
    N=${s%x*}; C=${s#*x}
    timeout 60 exp71/split_rows $N $C 10 >> $R/all.txt 2>&1; echo "split $s exit $?" >> $R/all.txt
  done
  for s in 4096x131072 8192x65536; do
    LOSSJIT_LIBRARY=$PWD/exp71/main/liblossjit_c.so.1 timeout 60 python3 -u bench/row_variants.py --shape $s --only cross-entropy --reps 10 >> $R/all.txt 2>&1
  done
done
