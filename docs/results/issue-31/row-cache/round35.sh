#!/usr/bin/env bash
# Round 35 (2026-11-26, H100): the row cache's defaults (512 threads, 4096 vector loads in flight)
# against no cache; the row cases of the gpu suite under them; and, with an experimental build
# (LJ_EXP_BLOCK_TEAM: the block per row even for rows a warp would take), whether short rows
# cached whole by a block team beat a warp team's partial cache.
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
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_rows.txt | head -20
echo "== defaults against no cache at $(elapsed) s"
timeout 150 build/bench/lossjit_bench --rows --reps 10 --json $OUT/rows_defaults.json \
  --variant row_cache=off --variant row_cache=auto > $OUT/rows_defaults.txt 2>&1; echo "rc $?" >> $OUT/rows_defaults.txt
grep -v "^\s*$" $OUT/rows_defaults.txt | cut -c1-140
echo "== block teams on short rows (experimental build) at $(elapsed) s"
LJ_EXP_BLOCK_TEAM=1 timeout 120 build/gpu/exp/lossjit_bench --rows --reps 10 --json $OUT/rows_block_team.json \
  --only "cross_entropy 32768x4096" --only "triplet 32768x8192" \
  --variant row_cache=on,block=128,unroll=8 --variant row_cache=on,block=256,unroll=4 --variant row_cache=on,block=256,unroll=8 \
  --variant row_cache=on,block=512,unroll=4 --variant row_cache=on,block=512,unroll=8 > $OUT/rows_block_team.txt 2>&1; echo "rc $?" >> $OUT/rows_block_team.txt
grep -v "^\s*$" $OUT/rows_block_team.txt | cut -c1-140 | tail -22
echo "== maps at $(elapsed) s"
for prog in 'exp(x - logsumexp(x, -1))' 'x - logsumexp(x, -1)' 'x / sqrt(mean(x^2, -1) + 1e-6)'; do
  for shape in 16384x32768 32768x4096; do
    timeout 60 build/lossjit bench "$prog" -i x=$shape:normal --sweep row_cache=auto,off --reps 10 --sets 1 -q > $OUT/map.txt 2>&1
    echo "$prog $shape"; sed -n 6,8p $OUT/map.txt | cut -c1-150; cat $OUT/map.txt >> $OUT/maps.txt
  done
done
echo "== end at $(elapsed) s"
