#!/bin/bash
# Round 121 (H100, after check.sh on the same machine): main's library (build/main-bin, f990852) and the
# new (build/new-bin) alternating by process: the gradient kernels of maps that reduce alone
# (round117/grad_sweep.py, upstream given) and forwards that divide by a value per row (forward.py);
# then the new against torch.compile, forward + backward (stop50/round113/rows.py --reference).
# Carry build/{main-bin,new-bin}.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
D=docs/results/issue-29/stop52/round121
ln -sf liblossjit_c.so.1.0 build/new-bin/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for k in 1 2; do
  for B in main new; do
    LOSSJIT_LIBRARY=$PWD/build/$B-bin/liblossjit_c.so.1.0 SHAPES="32768x4096 16384x8192" timeout 100 python3 -u \
      docs/results/issue-29/stop51/round117/grad_sweep.py default 2>&1 | grep "^(" | sed "s/^/$B /" | tee -a $OUT/grad.txt
  done
done
for k in 1 2; do
  for B in main new; do
    X=""; [ $k = 2 ] && [ $B = new ] && X=--reference
    LOSSJIT_LIBRARY=$PWD/build/$B-bin/liblossjit_c.so.1.0 timeout 120 python3 -u $D/forward.py $B $X 2>&1 | grep -v -i warn | tee -a $OUT/forward.txt
  done
done
SHAPES="32768x4096 16384x8192" LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0 timeout 150 python3 -u \
  docs/results/issue-29/stop50/round113/rows.py new default --reference 2>&1 | grep "^(" | tee $OUT/rows.txt
