#!/bin/bash
# Round 235 (H200): a walk's accumulators merged together (Team::all_reduce_each: one pair of block
# barriers for all). The new build's GPU tests of row reductions first, then cosine's forward and value
# + gradient (lossjit_bench --rows --variant row_cache=auto: the defaults, twice in turn in one process)
# with main (exp71/bin, c2242c2) and with the change (exp71/new), in turn, twice. Run from the repository root.
set -u
R=$OUT/r235
mkdir -p $R
LOSSJIT_SOURCE_DIR=$PWD timeout 90 exp71/new/lossjit_tests -tc="row programs: reductions match*,row programs: a mean and the squared*,row programs: rank 3*" > $R/tests.txt 2>&1
echo "exit $?" >> $R/tests.txt
tail -4 $R/tests.txt
for pass in 1 2; do
  for b in bin new; do
    timeout 30 exp71/$b/lossjit_bench --rows --reps 10 --examples examples --variant row_cache=auto --only "cosine 16384x16384" > $R/rows_${b}_$pass.txt 2>&1
    echo "== $b pass $pass exit $?"; grep "cosine" $R/rows_${b}_$pass.txt
  done
done
