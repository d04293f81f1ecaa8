#!/bin/bash
# Round 205 (stop 65, H100): fewer values a thread for fused row kernels that keep two inputs in the
# row cache (round 204: distillation 32768 x 4096 at 38% of the floor with the defaults, 128 threads
# x unroll 4, 159 registers; 55% at unroll 2). bench/row_variants.py, distillation KL and soft-target
# cross-entropy (x and t cached), the defaults against unroll 2 and 1 and block sizes, at four shapes.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/c_fold
export LOSSJIT_LIBRARY=$PWD/exp65/fold/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp65/fold/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
for s in 32768x4096 16384x8192 16384x32000 8192x1000; do
  timeout 130 python3 bench/row_variants.py --shape $s --reps 20 --only "distillation KL" --only "soft-target CE" \
    --variant default --variant unroll=2 --variant unroll=1 --variant unroll=2,block=128 --variant unroll=2,block=512 \
    --json $OUT/v_$s.json 2>&1
done > $OUT/variants.txt
cat $OUT/variants.txt
