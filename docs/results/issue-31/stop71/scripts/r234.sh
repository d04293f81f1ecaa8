#!/bin/bash
# Round 234 (H200): lossjit_bench --rows with the rooflines of each problem's own bytes (a read and a
# copy of its inputs' bytes) beside the 8 GB / 4 GB ones, main at d574cc3 + this bench change, twice.
# Run from the repository root.
set -u
R=$OUT/r234
mkdir -p $R
for pass in 1 2; do
  timeout 200 exp71/bin/lossjit_bench --rows --reps 10 --examples examples --json $R/rows$pass.json > $R/rows$pass.txt 2>&1
  echo "pass $pass exit $?" >> $R/rows$pass.txt
done
