#!/bin/bash
# Round 230 (H200): cross-entropy's value + gradient with rows split among blocks that merge through
# global memory (split_rows.cu, built as exp71/split_rows) against lossjit's default (main's library,
# exp71/main/liblossjit_c.so.1, through bench/row_variants.py), shape by shape. Run from the repository root.
set -u
R=$OUT/r230
mkdir -p $R
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv > $R/gpu.txt 2>&1
for s in 4096x131072 8192x65536 2048x262144 4096x128256 16384x32768; do
  N=${s%x*}; C=${s#*x}
  timeout 120 exp71/split_rows $N $C 10 > $R/split_$s.txt 2>&1; echo "split $s exit $?" >> $R/exits.txt
  V="--variant default"; [ $C -ge 131072 ] && V="$V --variant row_cluster=8"
  LOSSJIT_LIBRARY=$PWD/exp71/main/liblossjit_c.so.1 timeout 90 python3 -u bench/row_variants.py --shape $s --only cross-entropy --reps 10 $V > $R/lossjit_$s.txt 2>&1
  echo "lossjit $s exit $?" >> $R/exits.txt
done
