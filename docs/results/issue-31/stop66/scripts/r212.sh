#!/bin/bash
# Prepared for the next GPU session (either GPU; not yet run). Round 208 saw cosine's forward over
# 16384 x 16384 on an H200 at 94.5-94.6% of the read roofline with unroll 2 against the default's
# 92.4-92.6 (unroll 4, ByRowUnrollSeveralInputs), one shape of one program. This sweeps the forwards
# of two and three inputs along the row (a block a row and warps) for a rule, and class weights'
# forward (w[y] with w of [C]: counted as an input along the row, so it keeps unroll 4 where
# cross-entropy unrolls 8, though its walks load x alone). Then the targets' command on main.
# Build here; carry build/lossjit and build/bench/lossjit_bench.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/c212
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
sweep() {  # name, program, inputs...
  local name=$1 prog=$2; shift 2
  echo "== $name"
  timeout 40 build/lossjit bench "$prog" "$@" -q --sweep unroll=1,2,4,8 --sweep block=256,512 2>&1
}
{
  for s in 16384x16384 8192x32768 4096x65536 32768x4096; do
    sweep "cosine $s" examples/cosine.loss -i a=$s:uniform[-1,1] -i b=$s:uniform[-1,1]
    sweep "mse rows $s" 'mean(sum((a - b)^2, -1))' -i a=$s:normal -i b=$s:normal
  done
  for s in 32768x8192 16384x16384; do
    sweep "triplet $s" examples/triplet.loss -i a=$s:uniform[-1,1] -i p=$s:uniform[-1,1] -i n=$s:uniform[-1,1]
  done
  for s in 32768x4096 16384x8192 16384x32768; do
    N=${s%x*}; C=${s#*x}
    sweep "class weights $s" examples/cross_entropy_weighted.loss -i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64 \
      -i w=$C:uniform[0.5,2]
  done
} > $OUT/sweeps.txt 2>&1
awk '/^==/{print} /default/{print}' $OUT/sweeps.txt
timeout 150 build/bench/lossjit_bench --rows --reps 20 > $OUT/rows.txt 2>&1
grep -E "roofline|of read" $OUT/rows.txt | head -7
