#!/bin/bash
# Prepared for the next H200 session (not run in stop 71): the fused values and gradients GPU test with
# ca79cd8 (a walk's accumulators merged together), which round 235 could not fit, then the forwards of
# two and three inputs along the row at unroll 2 and 4 (cosine, triplet, a row MSE; stop 67's sweep)
# for a rule behind cosine's 95% at 256 x 2. Build first (cmake --build build), copy
# build/tests/lossjit_tests and build/lossjit into exp71/new/, carry exp71. Run from the repository root.
set -u
R=$OUT/r236
mkdir -p $R
LOSSJIT_SOURCE_DIR=$PWD timeout 300 exp71/new/lossjit_tests -tc="row programs: fused value and gradients match the reference" > $R/tests.txt 2>&1
echo "exit $?" >> $R/tests.txt
tail -4 $R/tests.txt
for s in 16384x16384 8192x32768; do
  timeout 60 exp71/new/lossjit bench examples/cosine.loss -i a=$s:normal -i b=$s:normal --sweep unroll=2,4 --sweep block=256,512 > $R/cosine_$s.txt 2>&1
  timeout 60 exp71/new/lossjit bench examples/triplet.loss -i a=$s:normal -i p=$s:normal -i n=$s:normal --sweep unroll=2,4 --sweep block=256,512 > $R/triplet_$s.txt 2>&1
  timeout 60 exp71/new/lossjit bench "mean(sum((a - b)^2, -1))" -i a=$s:normal -i b=$s:normal --sweep unroll=2,4 --sweep block=256,512 > $R/mse_rows_$s.txt 2>&1
done
grep -h "default\|^#" $R/*_*.txt
