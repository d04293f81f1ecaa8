#!/usr/bin/env bash
# Round 21 (2026-11-26, H100): per-row totals in shared memory and 32-bit argmax columns (fewer
# registers): the bench and the sweeps of round 20 again, the whole gpu suite, the differential.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== bench at $(elapsed) s"
timeout 150 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt; grep -E "three_results|rc |Error" $OUT/several_results.txt
IN="-i x=16384x32768:normal -i y=16384:integers[0,32767]:i64"
for name in ce ce_z_acc; do
  case $name in
    ce) P='lse = logsumexp(x, -1); mean(lse - x[y])';;
    ce_z_acc) P='lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc';;
  esac
  echo "== bench $name at $(elapsed) s"
  timeout 60 build/lossjit bench "$P" $IN --sweep unroll=1,2,4 --reps 15 -q > $OUT/bench_$name.txt 2>&1; echo "rc $?" >> $OUT/bench_$name.txt
  head -10 $OUT/bench_$name.txt | tail -5
done
echo "== gpu suite at $(elapsed) s"
timeout 280 build/tests/lossjit_tests --test-suite=gpu --test-case-exclude='*full size*' > $OUT/gpu_suite.txt 2>&1; echo "rc $?" >> $OUT/gpu_suite.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_suite.txt | head -20
echo "== differential gpu at $(elapsed) s"
left=$(( 560 - $(elapsed) )); [ $left -gt 40 ] && timeout $left python3 tests/differential/differential.py --device cuda --count 400 --time-limit $(( left - 15 )) --cli build/lossjit --seed 125 > $OUT/differential_gpu.txt 2>&1; echo "rc $?" >> $OUT/differential_gpu.txt
tail -6 $OUT/differential_gpu.txt
echo "== end at $(elapsed) s"
