#!/bin/bash
# Round 245 (H200): tma_rows.cu with rings of one segment's chunks beside the larger rings (in_place =
# 1): does the run-ahead past the next row's handed-back chunks matter, or would a bulk-copied row
# cache of the row's own size do? Run from the repository root.
set -u
R=$OUT/r245
mkdir -p $R
for s in 16384x32768 4096x131072 8192x65536; do
  timeout 90 exp73/tma_rows ${s%x*} ${s#*x} 10 1 > $R/tma_$s.txt 2>&1; echo "tma $s exit $?" >> $R/tma_$s.txt
  tail -2 $R/tma_$s.txt
done
