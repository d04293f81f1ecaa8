#!/usr/bin/env bash
# Round 39 (2026-11-26): thread-block clusters sharing a cached row (row_cluster). The gpu suite's
# row cases (clusters of 2 and 8, whole and partial shares, rows in turn), then the row problems
# without a cache, with one block a row, with the automatic clusters and with larger clusters; the
# maps at long rows; cross-entropy value + gradient against torch.compile.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== row cases at $(elapsed) s"
timeout 200 build/tests/lossjit_tests --test-suite=gpu -tc='row programs*' > $OUT/gpu_rows.txt 2>&1; echo "rc $?" >> $OUT/gpu_rows.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_rows.txt | head -20
grep -B2 -A12 "ERROR" $OUT/gpu_rows.txt | head -60
echo "== rows at $(elapsed) s"
timeout 150 build/bench/lossjit_bench --rows --reps 10 --json $OUT/rows.json --variant row_cache=off --variant row_cluster=1 \
  --variant row_cluster=auto --variant row_cluster=auto,unroll=8 --variant row_cluster=4 > $OUT/rows.txt 2>&1; echo "rc $?" >> $OUT/rows.txt
grep -v "^\s*$" $OUT/rows.txt | cut -c1-150 | tail -55
echo "== maps at $(elapsed) s"
for case in "exp(x - logsumexp(x, -1))|16384x32768:normal" "x - logsumexp(x, -1)|4096x131072:normal" "x / sqrt(mean(x * x, -1) + 1e-6)|16384x32768:normal"; do
  prog=${case%%|*}; input=${case##*|}
  timeout 60 build/lossjit bench "$prog" -i x=$input --sweep row_cluster=1,auto,4 --reps 10 --sets 1 -q > $OUT/map.txt 2>&1
  echo "$prog $input"; sed -n 6,9p $OUT/map.txt | cut -c1-160; cat $OUT/map.txt >> $OUT/maps.txt
done
echo "== several_results at $(elapsed) s"
timeout 80 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt | head -20; grep -E "rc |Error" $OUT/several_results.txt
echo "== end at $(elapsed) s"
