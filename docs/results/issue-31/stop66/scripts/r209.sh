#!/bin/bash
# Round 209 (stop 66, H200): a warp's rows of one input, values alone, at 256 threads x unroll 8
# (ByRowWarpOneInputThreads, ByRowWarpUnrollOneInput's H200 row). Part 1: the documented --rows
# command, the library before (exp66/base) and after (exp66/new) in turn; programs the rule also
# reaches (bfloat16 logits, logsumexp and amax means, row-reduction maps), each default beside the
# old and new shapes in one sweep. Part 2: the GPU tests of row programs and the GPU random
# differential with the change. Build here; copy the binaries into exp66/base (main at 75a9c8c)
# and exp66/new; carry exp66/base and exp66/new.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
for lib in base new base new; do
  echo "== $lib"
  LOSSJIT_CACHE_DIR=/tmp/c_$lib timeout 60 exp66/$lib/lossjit_bench --rows --reps 20 --only "cross_entropy 32768x4096" \
    --only "cross_entropy 16384x32768" 2>&1 | grep -E "of read|roofline"
done > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
run() {  # name, program, inputs...
  local name=$1 prog=$2; shift 2
  echo "== $name"
  LOSSJIT_CACHE_DIR=/tmp/c_new timeout 40 exp66/new/lossjit bench "$prog" "$@" -q --sweep block=256,512 --sweep unroll=4,8 2>&1
}
{
  for s in 32768x4096 65536x2048 16384x8192; do
    N=${s%x*}; C=${s#*x}
    run "cross-entropy bf16 $s" examples/cross_entropy.loss -i x=$s:normal:bf16 -i y=$N:integers[0,$((C-1))]:i64
    run "logsumexp mean $s" 'mean(logsumexp(x, -1))' -i x=$s:normal
    run "amax mean $s" 'mean(amax(x, -1))' -i x=$s:normal
  done
  run "sum map 32768x4096" 'sum(x, -1)' -i x=32768x4096:normal
  run "argmax map 32768x4096" 'argmax(x, -1)' -i x=32768x4096:normal
  run "logsumexp map 32768x4096" 'logsumexp(x, -1)' -i x=32768x4096:normal
} > $OUT/reach.txt 2>&1
awk '/^==/{print} /default/{print}' $OUT/reach.txt
LOSSJIT_CACHE_DIR=/tmp/c_new timeout 70 exp66/new/lossjit_bench --rows --reps 20 > $OUT/rows.txt 2>&1
grep -E "roofline|of read" $OUT/rows.txt | head -8
# part 2: tests
export LOSSJIT_LIBRARY=$PWD/exp66/new/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp66/new/liblossjit_c.so.1
i=0
for tc in "row programs: reductions*,row programs: logsumexp and argmax*" "row programs: out-of-range*,row programs: rank 3*" \
          "every input dtype*" "row programs: a mean and*,row programs: group norm*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 200 exp66/new/lossjit_tests -tc="$tc" > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 230 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 209 --time-limit 200 --cli exp66/new/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
