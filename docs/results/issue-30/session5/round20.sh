#!/usr/bin/env bash
# Round 20 (2026-11-26, H100): the shared accumulator's GPU case after the side-by-side fix; where the
# time of loss, z, acc goes (unroll and block sweeps of it, of loss, z, and of the cross-entropy alone).
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
echo "== shared accumulator and results cases at $(elapsed) s"
timeout 150 build/tests/lossjit_tests --test-suite=gpu --test-case='*share an accumulator*,several results*' > $OUT/gpu_shared.txt 2>&1; echo "rc $?" >> $OUT/gpu_shared.txt
grep -E "ERROR|MESSAGE|test cases|assertions|Status|rc " $OUT/gpu_shared.txt | head -20
IN="-i x=16384x32768:normal -i y=16384:integers[0,32767]:i64"
for name in ce ce_z ce_z_acc ce_acc; do
  case $name in
    ce) P='lse = logsumexp(x, -1); mean(lse - x[y])';;
    ce_z) P='lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); loss, z';;
    ce_acc) P='lse = logsumexp(x, -1); loss = mean(lse - x[y]); acc = mean(argmax(x, -1) == y); loss, acc';;
    ce_z_acc) P='lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc';;
  esac
  echo "== bench $name at $(elapsed) s"
  timeout 100 build/lossjit bench "$P" $IN --sweep unroll=1,2,4,8 --sweep block=256,512 --reps 15 -q > $OUT/bench_$name.txt 2>&1; echo "rc $?" >> $OUT/bench_$name.txt
  head -14 $OUT/bench_$name.txt
done
echo "== end at $(elapsed) s"
