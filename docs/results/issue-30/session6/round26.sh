#!/usr/bin/env bash
# Round 26 (2026-11-26, H100): the A/B of round 24 again with each build's CLI relinked (rounds 23
# and 24 copied a CLI that `make lossjit` had not relinked: their "old" builds were one and the same
# per-element build with reordered compares). A: a54cf76 (per element, as rounds 18-22); D: add_vec
# for logsumexp, the shared argmax accumulator per element; B: main (add_vec for both).
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0 LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
md5sum build/gpu/lossjit_A build/gpu/lossjit_D build/lossjit | tee $OUT/builds.txt
IN="-i x=16384x32768:normal -i y=16384:integers[0,32767]:i64"
CE='lse = logsumexp(x, -1); mean(lse - x[y])'
THREE='lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc'
for round in 1 2; do
  for b in build/gpu/lossjit_A build/gpu/lossjit_D build/lossjit; do
    for name in CE THREE; do
      P=${!name}
      r=$(timeout 60 $b bench "$P" $IN --reps 15 --sets 1 --json -q 2>>$OUT/err.txt | python3 -c "
import json,sys; d=json.load(sys.stdin)
print(' | '.join(f\"b{v['block_threads']} u{v['unroll']} {v['ms']:.4f} r{v['registers']} {v['roofline_fraction']:.3f} occ {v['occupancy']}\" for v in d['rows'][:1]))" 2>>$OUT/err.txt)
      echo "round $round $(basename $b) $name $r" | tee -a $OUT/ab.txt
    done
  done
done
echo "== several_results (main) at $(elapsed) s"
timeout 100 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/several_results.json > $OUT/several_results.txt 2>&1; echo "rc $?" >> $OUT/several_results.txt
grep -A4 -E '"forward_ms"|"fwd_bwd_ms"' $OUT/several_results.txt; grep -E "three_results|rc |Error" $OUT/several_results.txt
echo "== row test cases (main, with add_vec of one element = add) at $(elapsed) s"
export LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
timeout 150 build/tests/lossjit_tests --test-suite=gpu --test-case='row programs*' > $OUT/row_cases.txt 2>&1; echo "rc $?" >> $OUT/row_cases.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/row_cases.txt | head -20
echo "== end at $(elapsed) s"
