#!/usr/bin/env bash
# Round 34 (2026-11-26, H100): the row cache's threads and unroll. With a row cache of a whole row a
# block holds most of an SM's shared memory: the loads it keeps in flight must come from its own
# threads x unroll.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_CACHE_DIR=/tmp/ljcache
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== row variants at $(elapsed) s"
timeout 300 build/bench/lossjit_bench --rows --reps 10 --json $OUT/rows_variants.json \
  --variant row_cache=off --variant row_cache=off,unroll=4 \
  --variant row_cache=on,block=512,unroll=4 --variant row_cache=on,block=512,unroll=8 --variant row_cache=on,block=512,unroll=16 \
  --variant row_cache=on,block=1024,unroll=4 --variant row_cache=on,block=256,unroll=8 --variant row_cache=on,block=256,unroll=16 \
  > $OUT/rows_variants.txt 2>&1; echo "rc $?" >> $OUT/rows_variants.txt
tail -2 $OUT/rows_variants.txt
echo "== maps at $(elapsed) s"
for shape in 16384x32768 32768x4096; do
  timeout 90 build/lossjit bench 'exp(x - logsumexp(x, -1))' -i x=$shape:normal -k row_cache=on --sweep block=256,512,1024 --sweep unroll=2,4,8 --reps 10 --sets 1 -q > $OUT/softmax_$shape.txt 2>&1; echo "rc $?" >> $OUT/softmax_$shape.txt
  tail -3 $OUT/softmax_$shape.txt
done
echo "== end at $(elapsed) s"
