#!/bin/bash
# Round 122 (H200): the final library (no value total in a map's gradient kernel; round 121's
# reciprocal per row reverted) on the GPU cases of row gradients, main's (build/main-bin) and the new
# (build/new-bin) gradient kernels alternating by process, then KernelBench's norms and softmax at their
# own shapes (bench/kernelbench.py; the problems' files carried in build/kb, from
# ScalingIntelligence/KernelBench 423217d). Carry build/{new-bin,main-bin,tests/lossjit_tests,kb}.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/new-bin/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for T in 'row programs: gradients of maps that reduce*' 'row programs: fused value and gradients*'; do
  timeout 150 build/tests/lossjit_tests -ts=gpu -tc="$T" 2>&1 | tail -3 | tee -a $OUT/cases.txt
done
for k in 1 2; do
  for B in main new; do
    LOSSJIT_LIBRARY=$PWD/build/$B-bin/liblossjit_c.so.1.0 SHAPES="32768x4096" timeout 60 python3 -u \
      docs/results/issue-29/stop51/round117/grad_sweep.py default 2>&1 | grep "^(" | sed "s/^/$B /" | tee -a $OUT/grad.txt
  done
done
timeout 330 python3 -u bench/kernelbench.py --kernelbench build/kb/KernelBench/level1 --device cuda --rounds 3 --reps 10 \
  --only 23 24 36 37 38 39 40 --json $OUT/kernelbench.json --time-limit 300 2>&1 | grep -v -i warn | tee $OUT/kernelbench.txt
