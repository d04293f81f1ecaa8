#!/bin/bash
# Round 92: the argmax's largest-and-first by a pairwise fold with its column (no search after it):
# 8d66338 (old), 8e2dd9d (mid) and the working tree (new), alternating; the GPU tests of the
# shared accumulator and of reductions in every team.
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
echo 'lse = logsumexp(x, -1); mean(lse - x[y])' > /tmp/ce.loss
echo 'lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc' > /tmp/cza.loss
LOSSJIT_CACHE_DIR=/tmp/ljcache timeout 200 build/tests/lossjit_tests -ts=gpu -tc="*share an accumulator*,*reductions match the reference in every team*" > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
tail -4 $OUT/cpp.txt
for round in 1 2; do for cli in old mid new; do
  case $cli in old) B=build/ab/lossjit_old;; mid) B=build/ab/lossjit_mid;; new) B=build/lossjit;; esac
  for case in "ce 16384x32768 f32" "cza 16384x32768 f32" "ce 4096x131072 bf16" "cza 4096x131072 bf16" "ce 32768x4096 f32" "cza 32768x4096 f32"; do
    set -- $case
    echo "$round $cli $case $(LOSSJIT_CACHE_DIR=/tmp/ljcache_$cli timeout 60 $B bench /tmp/$1.loss -q -i x=$2:normal:$3 -i "y=${2%%x*}:integers[0,4095]:i64" --reps 20 --sets 1 2>&1 | tail -1)"
  done
done; done | tee $OUT/ab.txt
