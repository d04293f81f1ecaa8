#!/bin/bash
# Round 247 (H200): lossjit's row cache filled by bulk copies (the experiment patch
# stop73/bulk_row_cache.patch on 99898d8: KernelSpec::row_prefetch_bulk, chosen where LJX_BULK is set,
# the row prefetch is on without the walk ahead and a block takes each row). exp73/bulk: that build's
# lossjit_tests, lossjit_bench, liblossjit_c.so.1. First the GPU test of the row prefetch with every
# block team's prefetch made bulk; then lossjit_bench's cross-entropy and the cross-entropy family
# (bench/row_variants.py) without LJX_BULK (main's kernels) and with it, in turn.
set -u
R=$OUT/r247
mkdir -p $R
LJX_BULK=1 LOSSJIT_SOURCE_DIR=$PWD timeout 200 exp73/bulk/lossjit_tests -tc="row programs: the row prefetch gives*" > $R/tests_prefetch.txt 2>&1
echo "exit $?" >> $R/tests_prefetch.txt
tail -4 $R/tests_prefetch.txt
V="--variant row_cache=auto --variant row_prefetch=on --variant row_prefetch=on,block=512"
for i in 1 2; do
  timeout 60 exp73/bulk/lossjit_bench --rows --reps 10 --examples examples --only "cross_entropy 16384x32768" \
    --only "cross_entropy 32768x4096" $V > $R/bench_main_$i.txt 2>&1
  LJX_BULK=1 timeout 60 exp73/bulk/lossjit_bench --rows --reps 10 --examples examples --only "cross_entropy 16384x32768" \
    --only "cross_entropy 32768x4096" $V > $R/bench_bulk_$i.txt 2>&1
done
grep -h "value+grad" $R/bench_*.txt
for s in 16384x32768 8192x65536; do
  LOSSJIT_LIBRARY=$PWD/exp73/bulk/liblossjit_c.so.1 timeout 150 python3 -u bench/row_variants.py --shape $s --reps 10 \
    --variant default --variant row_prefetch=on --variant row_prefetch=on,block=512 > $R/family_main_$s.txt 2>&1
  LJX_BULK=1 LOSSJIT_LIBRARY=$PWD/exp73/bulk/liblossjit_c.so.1 timeout 150 python3 -u bench/row_variants.py --shape $s --reps 10 \
    --variant default --variant row_prefetch=on --variant row_prefetch=on,block=512 > $R/family_bulk_$s.txt 2>&1
  tail -12 $R/family_main_$s.txt; tail -12 $R/family_bulk_$s.txt
done
LJX_BULK=1 LOSSJIT_LIBRARY=$PWD/exp73/bulk/liblossjit_c.so.1 timeout 60 python3 -u tests/differential/differential.py --device cuda \
  --count 300 --seed 247 --time-limit 40 --cli exp73/bulk/lossjit > $R/differential.txt 2>&1
echo "exit $?" >> $R/differential.txt
tail -3 $R/differential.txt
