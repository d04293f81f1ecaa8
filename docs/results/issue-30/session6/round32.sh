#!/usr/bin/env bash
# Round 32 (2026-11-26, H100): the partials workspace sized for kMaxBlocksPerSm blocks per SM
# whatever the count of totals (main divided it among them: loss, z, acc ran 1408 blocks, 1.78
# waves at 6 resident per SM). main (79258d0) against that build, alternating; then the row and
# several-results GPU cases on the new build.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
md5sum build/gpu/lossjit_main build/gpu/lossjit_grid build/lossjit | tee $OUT/builds.txt
IN="-i x=16384x32768:normal -i y=16384:integers[0,32767]:i64"
CE='lse = logsumexp(x, -1); mean(lse - x[y])'
THREE='lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc'
for round in 1 2 3; do
  for v in main grid; do
    for name in CE THREE; do
      P=${!name}
      r=$(timeout 60 build/gpu/lossjit_$v bench "$P" $IN --reps 15 --sets 1 --json -q 2>>$OUT/err.txt | python3 -c "
import json,sys; d=json.load(sys.stdin)
print(' | '.join(f\"b{v['block_threads']} grid {v['grid']} {v['ms']:.4f} r{v['registers']} {v['roofline_fraction']:.3f} err {v['rel_error']:.2e}\" for v in d['rows'][:1]))" 2>>$OUT/err.txt)
      echo "round $round $v $name $r" | tee -a $OUT/ab.txt
    done
  done
done
echo "== gpu cases at $(elapsed) s"
timeout 150 build/tests/lossjit_tests --test-suite=gpu --test-case='row programs*,several*' > $OUT/gpu_cases.txt 2>&1; echo "rc $?" >> $OUT/gpu_cases.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_cases.txt | head -20
echo "== end at $(elapsed) s"
