#!/usr/bin/env bash
# Round 33 (2026-11-26, H100): the row cache (rows kept in shared memory between the walks).
# Correctness of the row programs with it (automatic, off, forced on with partial rows), then the
# row problems' value and value+grad for variants in turn (inputs uploaded once), then the softmax
# map and an L2 normalization through `lossjit bench` sweeps.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== row tests at $(elapsed) s"
timeout 200 build/tests/lossjit_tests --test-suite=gpu -tc='row programs*' > $OUT/gpu_rows.txt 2>&1; echo "rc $?" >> $OUT/gpu_rows.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_rows.txt | head -30
echo "== row variants at $(elapsed) s"
timeout 260 build/bench/lossjit_bench --rows --reps 10 --json $OUT/rows_variants.json \
  --variant row_cache=off --variant row_cache=on --variant row_cache=on,block=128 --variant row_cache=on,block=256 \
  --variant row_cache=on,block=512 --variant row_cache=on,block=1024 --variant row_cache=on,unroll=4 \
  > $OUT/rows_variants.txt 2>&1; echo "rc $?" >> $OUT/rows_variants.txt
cat $OUT/rows_variants.txt | grep -v "^\s*$" | tail -80
echo "== maps at $(elapsed) s"
for shape in 16384x32768 32768x4096; do
  timeout 60 build/lossjit bench 'exp(x - logsumexp(x, -1))' -i x=$shape:normal --sweep row_cache=on,off --sweep block=128,256,512,1024 --reps 10 --sets 1 -q > $OUT/softmax_$shape.txt 2>&1; echo "rc $?" >> $OUT/softmax_$shape.txt
  head -25 $OUT/softmax_$shape.txt
done
timeout 60 build/lossjit bench 'x / max(sqrt(sum(x^2, -1)), 1e-12)' -i x=8192x65535:normal --sweep row_cache=on,off --sweep block=256,512,1024 --reps 10 --sets 1 -q > $OUT/l2_8192x65535.txt 2>&1; echo "rc $?" >> $OUT/l2_8192x65535.txt
head -20 $OUT/l2_8192x65535.txt
echo "== end at $(elapsed) s"
