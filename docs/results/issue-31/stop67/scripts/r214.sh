#!/bin/bash
# Round 214 (stop 67, H200): the committed rule (exp67/final: class weights counted as one input
# where a warp takes the row, as two where a block does). (1) GPU tests of row programs and the GPU
# random differential with it, in parallel. (2) Then, timed: class weights 65536x2048 (forward and
# value + gradient), main's CLI/library (exp67/base = exp66/cap) and the rule's in turn; leads for
# the next session: cross-entropy's value + gradient at 16384x32768 with the row cache at 1024 x 2
# (class weights' kernel there was 2-6% faster than at 1024 x 4, cross-entropy's default), and
# triplet's forward over 16384x16384 at unroll 2 and 4 (cosine's block rows were 2% faster at 2).
# Carry exp67 (base, final; c_final holds kernels compiled here by warm214.sh).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
cp -r exp67/c_final /tmp/c_final; cp -r exp67/c_base /tmp/c_base
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
i=0
for tc in "row programs: class-weight*,row programs: the gradient of an input of one*" "row programs: fused value*" \
          "row programs: reductions*,row programs: logsumexp and argmax*" "row programs: out-of-range*,row programs: rank 3*" \
          "row programs: the row prefetch*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 170 exp67/final/lossjit_tests -tc="$tc" > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
# The differential's GPU side goes through the library: the call ran it without this line (its
# output said no liblossjit_c.so.1) and a second call ran it again with it (round214-h200/differential.txt).
export LOSSJIT_LIBRARY=$PWD/exp67/final/liblossjit_c.so.1
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 175 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 214 --time-limit 150 --cli exp67/final/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|^exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
{
  s=65536x2048; in="-i x=$s:normal -i y=65536:integers[0,2047]:i64 -i w=2048:uniform[0.5,2]"
  for round in 1 2; do
    for v in base final; do
      line=$(LOSSJIT_CACHE_DIR=/tmp/c_$v timeout 30 exp67/$v/lossjit bench examples/cross_entropy_weighted.loss $in -q 2>&1 | grep -E "^ *1 ")
      echo "$round | forward class weights $s | $v | $line"
    done
    for v in base final; do
      line=$(LOSSJIT_CACHE_DIR=/tmp/c_$v LOSSJIT_LIBRARY=$PWD/exp67/$v/liblossjit_c.so.1 timeout 60 \
             python3 bench/row_variants.py --shape $s --only "class weights" --reps 10 2>&1 | grep -E "of floor|rror" | head -3)
      echo "$round | value+grad class weights $s | $v | $line"
    done
  done
  LOSSJIT_CACHE_DIR=/tmp/c_final LOSSJIT_LIBRARY=$PWD/exp67/final/liblossjit_c.so.1 timeout 90 python3 bench/row_variants.py \
    --shape 16384x32768 --only cross-entropy --only "class weights" --reps 10 --variant default \
    --variant block=1024,unroll=2,row_cache=on,row_prefetch=on --variant block=1024,unroll=4,row_cache=on,row_prefetch=on 2>&1
  echo "== triplet 16384x16384"
  LOSSJIT_CACHE_DIR=/tmp/c_final timeout 75 exp67/final/lossjit bench examples/triplet.loss -i a=16384x16384:uniform[-1,1] \
    -i p=16384x16384:uniform[-1,1] -i n=16384x16384:uniform[-1,1] -q --sets 1 --sweep unroll=2,4 --sweep block=256,512 2>&1
} > $OUT/timed.txt 2>&1
cat $OUT/timed.txt
