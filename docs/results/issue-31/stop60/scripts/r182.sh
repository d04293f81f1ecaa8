#!/bin/bash
# Round 182 (not run at stop 60; for the next H200): the harness with P4 (the next row's loads after
# the tile's gradient, where ptxas put the hand-written kernel's), and bisect: the hand-written
# schedule with the printed kernel's differences added one at a time. Build first, here:
# AHEAD=... COPIES=build/lossjit docs/results/issue-31/stop60/scripts/build.sh; carry exp60/harness,
# exp60/bisect.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
(cd exp60 && for s in "16384 32768" "16384 32000" "8192 49152"; do timeout 100 ./harness $s; done) > $OUT/harness.txt 2>&1
(cd exp60 && for s in "16384 32768" "16384 32000"; do timeout 100 ./bisect $s; done) > $OUT/bisect.txt 2>&1
# The bfloat16 fused cross-entropy whose default kernel (1024 threads x unroll 8) keeps 168 bytes a thread
# in local memory (`lossjit compile ... --grad x --gpu h200`, stop 60) against the kernels that keep
# none: 1024 x 4 and 512 x 8 with the row cache asked for (1024 x 4 alone drops the cache: too few bytes in
# flight for it). Carry build/src/capi/liblossjit_c.so.1.0.
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
for s in 16384x32768 16384x32000; do
  LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1 timeout 120 python3 bench/row_variants.py --shape $s --dtype bfloat16 \
    --only cross-entropy --only focal --variant default --variant block=1024,unroll=4,row_cache=on --variant block=512,unroll=8,row_cache=on
done > $OUT/bf16_variants.txt 2>&1
