#!/bin/bash
# Round 208 (stop 66, H200): the forward of the cross-entropy family over rows of 4096 columns, a
# warp a row (the defaults) against a block a row and other team sizes and unrolls; then today's
# --rows table. Build here; carry build/bench/lossjit_bench, build/lossjit and exp66/cache.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/c208
cp -r exp66/cache /tmp/c208  # round 208's family kernels, compiled here (scripts/warm208.sh)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
B=build/bench/lossjit_bench
V=(--variant row_cache=auto
   --variant unroll=8 --variant unroll=2 --variant block=256 --variant block=1024 --variant block=256,unroll=8
   --variant row_team=block --variant row_team=block,unroll=4 --variant row_team=block,block=512
   --variant row_team=block,block=512,unroll=4 --variant row_team=block,block=1024 --variant row_team=block,block=128)
timeout 200 $B --rows --reps 20 --only "cross_entropy 32768x4096" "${V[@]}" > $OUT/ce4096.txt 2>&1
echo "ce4096 exit $?"; grep -E "of read" $OUT/ce4096.txt
timeout 120 $B --rows --reps 20 --only "cosine 16384x16384" --variant row_cache=auto --variant unroll=2 --variant unroll=8 \
  --variant block=256 --variant block=1024 --variant block=1024,unroll=2 --variant blocks_per_sm=1 > $OUT/cosine.txt 2>&1
echo "cosine exit $?"; grep -E "of read" $OUT/cosine.txt
timeout 150 $B --rows --reps 20 > $OUT/rows.txt 2>&1
echo "rows exit $?"; grep -E "read|floor" $OUT/rows.txt | head -30
# the rest of the family's forwards at 32768 x 4096 and neighbouring widths (lossjit bench sweeps)
for s in 32768x4096 65536x2048 16384x8192; do
  N=${s%x*}; C=${s#*x}
  for prog in cross_entropy cross_entropy_smoothing focal cross_entropy_z_acc cross_entropy_weighted; do
    extra=(); [ $prog = cross_entropy_weighted ] && extra=(-i w=$C:uniform[0.5,2])
    echo "== $prog $s"
    timeout 30 build/lossjit bench examples/$prog.loss -i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64 "${extra[@]}" -q \
      --sweep row_team=warp,block --sweep unroll=2,4,8 --sweep block=256,512,1024 2>&1
  done
done > $OUT/family.txt 2>&1
echo "family exit $?"
