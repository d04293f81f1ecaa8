#!/usr/bin/env bash
# Round 23 (2026-11-26, H100): (1) LogSumExpAcc tests below-the-maximum first and the shared
# logsumexp+argmax accumulator follows its branches (add_then) instead of comparing again after it:
# CE and loss,z,acc with three builds alternating (116b1a0: the fused add of round 21; 0bc930a:
# round 22's 1.40x; this one), then bench/several_results.py; (2) the side-by-side test case that
# round 22's 200 s limit cut off, alone.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
IN="-i x=16384x32768:normal -i y=16384:integers[0,32767]:i64"
CE='lse = logsumexp(x, -1); mean(lse - x[y])'
THREE='lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc'
for round in 1 2; do
  for b in build/gpu/lossjit_116b1a0 build/gpu/lossjit_0bc930a build/lossjit; do
    for name in CE THREE; do
      P=${!name}
      ms=$(timeout 60 $b bench "$P" $IN --reps 20 --json -q 2>$OUT/err.txt | python3 -c "import json,sys; d=json.load(sys.stdin); v=d['rows'][0]; print(round(v['ms'],4), v['registers'], round(v['roofline_fraction'],3))" 2>>$OUT/err.txt)
      echo "round $round $(basename $b) $name $ms" | tee -a $OUT/ab.txt
    done
  done
done
echo "== bench at $(elapsed) s"
timeout 100 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt; grep -E "three_results|rc |Error" $OUT/several_results.txt
echo "== side-by-side case at $(elapsed) s"
timeout 300 build/tests/lossjit_tests --test-case='row programs along other dimensions*' -d > $OUT/side_case.txt 2>&1; echo "rc $?" >> $OUT/side_case.txt
grep -E "ERROR|test cases|assertions|Status|rc |seconds" $OUT/side_case.txt | head -20
echo "== end at $(elapsed) s"
