#!/usr/bin/env bash
# Round 40 (2026-11-26): whole tiles without a test per u (the compiler interleaves a tile's
# elements; logsumexp adds a tile at once) against main before it (build/gpu/old: 659e5c4), in
# turn on this GPU; the row cases of the gpu suite (clusters asked for, whole and partial tiles).
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== rows, old and new in turn, at $(elapsed) s"
for round in 1 2; do
  for v in old new; do
    bench=build/bench/lossjit_bench; [ $v = old ] && bench=build/gpu/old/lossjit_bench
    timeout 60 $bench --rows --reps 10 --variant row_cache=off --variant row_cache=auto > $OUT/rows_$v$round.txt 2>&1
    echo "-- $v $round"; grep -E "^(cross|cosine|triplet)" $OUT/rows_$v$round.txt | awk 'NR%2==1 || 1' | cut -c1-140 | sort -u -k1,2 | head -20
  done
done
echo "== maps at $(elapsed) s"
for case in "exp(x - logsumexp(x, -1))|16384x32768:normal" "x - logsumexp(x, -1)|32768x4096:normal" "x / sqrt(mean(x * x, -1) + 1e-6)|16384x32768:normal"; do
  prog=${case%%|*}; input=${case##*|}
  for v in old new; do
    cli=build/lossjit; [ $v = old ] && cli=build/gpu/old/lossjit
    timeout 60 $cli bench "$prog" -i x=$input --sweep row_cache=auto,off --reps 10 --sets 1 -q > $OUT/map.txt 2>&1
    echo "$v $prog $input"; sed -n 6,7p $OUT/map.txt | cut -c1-150; cat $OUT/map.txt >> $OUT/maps_$v.txt
  done
done
echo "== several_results at $(elapsed) s"
timeout 80 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt | head -20; grep -E "rc |Error" $OUT/several_results.txt
echo "== row cases at $(elapsed) s"
left=$(( 575 - $(elapsed) ))
timeout $left build/tests/lossjit_tests --test-suite=gpu -tc='row programs*' -d > $OUT/gpu_rows.txt 2>&1; echo "rc $?" >> $OUT/gpu_rows.txt
grep -E "ERROR|test cases|assertions|Status|rc |^[0-9.]+ s:" $OUT/gpu_rows.txt | head -30
grep -B2 -A12 "ERROR" $OUT/gpu_rows.txt | head -60
echo "== end at $(elapsed) s"
