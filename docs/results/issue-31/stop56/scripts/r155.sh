#!/bin/bash
# Round 155 (H200): the instruction diet (fmax largest, whole tiles read from the cache, stride-1
# walks, 32-bit one-hot) against HEAD's library, alternating in one call; SASS sizes; ncu counts.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
O=$OUT/r155; mkdir -p $O/sass
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt
for f in build/sass/*.cubin; do n=$(basename $f .cubin); cuobjdump -sass $f > $O/sass/$n.sass 2>&1; done
for n in ce16_vg ce32_vg ce32_fwd cos_vg cos_fwd tri_vg kl_fwd; do
  echo "$n old $(grep -c '/\*[0-9a-f]\{4\}\*/' $O/sass/$n.sass) new $(grep -c '/\*[0-9a-f]\{4\}\*/' $O/sass/new_$n.sass)" >> $O/sass_counts.txt
done
for r in 1 2; do
  LOSSJIT_CACHE_DIR=/tmp/c_old timeout 150 build-old/bench/lossjit_bench --rows --reps 10 --examples examples --no-accuracy > $O/old$r.txt 2>&1
  LOSSJIT_CACHE_DIR=/tmp/c_new timeout 150 build/bench/lossjit_bench --rows --reps 10 --no-accuracy > $O/new$r.txt 2>&1
done
LOSSJIT_CACHE_DIR=/tmp/c_new timeout 200 build/bench/lossjit_bench --rows --reps 10 --variant row_cache=auto --variant row_prefetch=on --variant block=1024 > $O/new_variants.txt 2>&1
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats --section LaunchStats"
for which in new; do
  B=build
  LOSSJIT_CACHE_DIR=/tmp/c_$which timeout 100 ncu --clock-control none --kernel-name regex:lossjit --launch-skip 2 --launch-count 1 $SEC $B/lossjit run examples/cross_entropy.loss -i x=16384x32768:uniform[-4,4] -i y=16384:integers[0,32767]:i64 --grad x > $O/ncu_ce16_$which.txt 2>&1
done
cd $OUT && tar czf r155.tgz r155 && rm -rf r155
