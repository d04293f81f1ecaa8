#!/bin/bash
# Round 213 (stop 67, H200). (1) Class weights (w[y], w of [C]) counted as one input along the row,
# as its walks load x alone: main's CLI and library (exp66/cap, the committed rule of stop 66) against
# the change's (exp67/new), in turn, twice: the forward's default (`lossjit bench -q`) and the value and
# gradient (`bench/row_variants.py --only "class weights"`), at 32768x4096, 16384x8192, 16384x32768.
# (2) Stop 66's r212 sweeps of two- and three-input forwards (cosine, a row MSE, triplet) over unroll
# and block, for a rule. Kernels compiled here (warm213.sh); carry exp66/cap and exp67/new.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
for v in base new; do cp -r exp67/c_$v /tmp/c_$v; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
weights() {
  for s in 32768x4096 16384x8192 16384x32768; do
    N=${s%x*}; C=${s#*x}
    echo "class weights $s|-i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64 -i w=$C:uniform[0.5,2]"
  done
}
sweeps() {
  for s in 16384x16384 8192x32768 32768x4096; do
    echo "cosine $s|examples/cosine.loss|-i a=$s:uniform[-1,1] -i b=$s:uniform[-1,1]"
    echo "mse rows $s|mean(sum((a - b)^2, -1))|-i a=$s:normal -i b=$s:normal"
  done
  for s in 32768x8192 16384x16384; do
    echo "triplet $s|examples/triplet.loss|-i a=$s:uniform[-1,1] -i p=$s:uniform[-1,1] -i n=$s:uniform[-1,1]"
  done
}
bin() { if [ $1 = base ]; then echo exp66/cap; else echo exp67/new; fi; }
for round in 1 2; do
  weights | while IFS='|' read -r name inputs; do
    for v in base new; do
      line=$(LOSSJIT_CACHE_DIR=/tmp/c_$v timeout 30 $(bin $v)/lossjit bench examples/cross_entropy_weighted.loss $inputs -q 2>&1 \
             | grep -E "^ *1 ")
      echo "$round | forward $name | $v | $line"
    done
  done
  for s in 32768x4096 16384x8192 16384x32768; do
    for v in base new; do
      line=$(LOSSJIT_CACHE_DIR=/tmp/c_$v LOSSJIT_LIBRARY=$PWD/$(bin $v)/liblossjit_c.so.1 timeout 60 \
             python3 bench/row_variants.py --shape $s --only "class weights" --reps 10 2>&1 | grep -E "of floor|rror" | head -3)
      echo "$round | value+grad class weights $s | $v | $line"
    done
  done
done > $OUT/weights.txt 2>&1
cat $OUT/weights.txt
sweeps | while IFS='|' read -r name prog inputs; do
  echo "== $name"
  LOSSJIT_CACHE_DIR=/tmp/c_new timeout 40 exp67/new/lossjit bench "$prog" $inputs -q --sweep unroll=1,2,4,8 --sweep block=256,512 2>&1
done > $OUT/sweeps.txt 2>&1
awk '/^==/{print} /default/{print}' $OUT/sweeps.txt
