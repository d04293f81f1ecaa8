#!/bin/bash
# Round 126 (one GPU a call; the same script on an H100, then an H200): KL's term with one log
# (lj_kl_term) against the two-log form in one process, the GPU tests it touches, and KernelBench
# 98 and the outer-axis reductions 47-53 at stop 52's unroll defaults.
set -x
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
ldd build/lossjit | grep "not found" > $OUT/ldd.txt
KL='batchmean(xlogy(t, t) - t * log(p))'
KL2='batchmean(xlogy(t, t) - xlogy(t, p))'  # two logs: the form lj_kl_term does not take (t == 0 aside, the same values)
for round in 1 2; do
  for prog in "$KL" "$KL2"; do
    build/lossjit bench "$prog" -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 20 --sets 1 -q >> $OUT/kl.txt 2>&1
  done
done
build/lossjit bench "$KL" -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 20 --sets 1 -q --sweep fast_math=off,on >> $OUT/kl.txt 2>&1
timeout 200 build/tests/lossjit_tests -tc="KL*,log and xlogy*,row programs along other dimensions*" > $OUT/gpu_tests.txt 2>&1
python3 bench/kernelbench.py --kernelbench build/kb/KernelBench/level1 --device cuda --rounds 3 --reps 10 --only 98 47 48 49 51 52 53 95 --json $OUT/kb.json > $OUT/kernelbench.txt 2>&1
# Cross-entropy forward at issue 31's three shapes (% of the read roofline)
for shape in 32768x4096 16384x32768 4096x131072; do
  n=${shape%x*}; c=${shape#*x}
  build/lossjit bench examples/cross_entropy.loss -i x=$shape:uniform[-4,4] -i y=$n:integers[0,$((c-1))]:i64 --reps 20 --sets 1 -q >> $OUT/ce.txt 2>&1
done
