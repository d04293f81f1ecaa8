#!/usr/bin/env bash
# Round 36 (2026-11-26, H100): the row cache's final defaults (bytes in flight; block teams where
# warps would keep less than half their rows). The whole gpu suite, the Python GPU tests, the
# defaults against no cache (row problems, bf16 softmax, an L2 normalization of odd rows), the
# fused cross-entropy value + gradient against torch.compile, then the differential.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== gpu suite at $(elapsed) s"
timeout 340 build/tests/lossjit_tests --test-suite=gpu --test-case-exclude='*full size*' > $OUT/gpu_suite.txt 2>&1; echo "rc $?" >> $OUT/gpu_suite.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_suite.txt | head -20
echo "== python gpu at $(elapsed) s"
timeout 120 python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu.py > $OUT/python_gpu.txt 2>&1; echo "rc $?" >> $OUT/python_gpu.txt
tail -3 $OUT/python_gpu.txt
echo "== defaults against no cache at $(elapsed) s"
timeout 100 build/bench/lossjit_bench --rows --reps 10 --json $OUT/rows_defaults.json --only "triplet 32768x8192" --only "cross_entropy 16384x32768" \
  --variant row_cache=off --variant row_cache=auto > $OUT/rows_defaults.txt 2>&1; echo "rc $?" >> $OUT/rows_defaults.txt
grep -v "^\s*$" $OUT/rows_defaults.txt | cut -c1-140 | tail -9
for case in "exp(x - logsumexp(x, -1))|32768x4096:normal:bf16" "x / max(sqrt(sum(x^2, -1)), 1e-12)|8192x65535:normal"; do
  prog=${case%%|*}; input=${case##*|}
  timeout 60 build/lossjit bench "$prog" -i x=$input --sweep row_cache=auto,off --reps 10 --sets 1 -q > $OUT/map.txt 2>&1
  echo "$prog $input"; sed -n 6,8p $OUT/map.txt | cut -c1-150; cat $OUT/map.txt >> $OUT/maps.txt
done
echo "== several_results at $(elapsed) s"
timeout 100 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt | head -20; grep -E "rc |Error" $OUT/several_results.txt
left=$(( 580 - $(elapsed) )); [ $left -gt 40 ] && timeout $left python3 tests/differential/differential.py --device cuda --count 300 --time-limit $(( left - 15 )) --cli build/lossjit --seed 129 > $OUT/differential_gpu.txt 2>&1; echo "rc $?" >> $OUT/differential_gpu.txt
tail -4 $OUT/differential_gpu.txt
echo "== end at $(elapsed) s"
