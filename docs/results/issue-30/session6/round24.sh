#!/usr/bin/env bash
# Round 24 (2026-11-26, H100): logsumexp adds a vector load's group at once (add_vec: one rescale,
# exps summed in float, one conversion to double). Builds alternating: A 116b1a0 (per element),
# D (add_vec for logsumexp alone; the shared argmax accumulator per element), B (both add_vec).
# Then correctness of B (row test cases, Python GPU tests, the differential) and the Python
# forward+backward overhead (the eager autograd.Function).
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
  for b in build/gpu/lossjit_116b1a0 build/gpu/lossjit_D build/lossjit; do
    for name in CE THREE; do
      P=${!name}
      r=$(timeout 60 $b bench "$P" $IN --sweep block=256,512 --reps 15 --sets 1 --json -q 2>>$OUT/err.txt | python3 -c "
import json,sys; d=json.load(sys.stdin)
print(' | '.join(f\"b{v['block_threads']} {v['ms']:.4f} r{v['registers']} {v['roofline_fraction']:.3f}{' def' if v['default'] else ''}\" for v in d['rows']))" 2>>$OUT/err.txt)
      echo "round $round $(basename $b) $name $r" | tee -a $OUT/ab.txt
    done
  done
done
echo "== row test cases at $(elapsed) s"
timeout 150 build/tests/lossjit_tests --test-suite=gpu --test-case='row programs*,*cross*,*several*' > $OUT/row_cases.txt 2>&1; echo "rc $?" >> $OUT/row_cases.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/row_cases.txt | head -20
echo "== python gpu at $(elapsed) s"
timeout 100 python3 -m pytest -q -p no:cacheprovider python/tests/test_gpu.py > $OUT/python_gpu.txt 2>&1; echo "rc $?" >> $OUT/python_gpu.txt
grep -E "passed|failed|Error|rc " $OUT/python_gpu.txt | tail -8
echo "== python overhead at $(elapsed) s"
timeout 120 python3 bench/python_overhead.py --calls 5000 --repeats 5 --json $OUT/overhead.json > $OUT/overhead.txt 2>&1; echo "rc $?" >> $OUT/overhead.txt
cat $OUT/overhead.txt | grep -v "^part" | head -30
echo "== differential gpu at $(elapsed) s"
left=$(( 570 - $(elapsed) )); [ $left -gt 40 ] && timeout $left python3 tests/differential/differential.py --device cuda --count 300 --time-limit $(( left - 15 )) --cli build/lossjit --seed 127 > $OUT/differential_gpu.txt 2>&1; echo "rc $?" >> $OUT/differential_gpu.txt
tail -4 $OUT/differential_gpu.txt
echo "== end at $(elapsed) s"
