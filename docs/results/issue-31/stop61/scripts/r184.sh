#!/bin/bash
# Round 184 (H200): bfloat16 logits, fused value + gradient, through the library as committed: the
# default (1024 threads x unroll 8 with the row cache: 168-192 bytes a thread of local memory on
# sm_90) against the cache turned off (what the bytes-in-flight rule would fall back to) and the two
# spill-free kernels that keep the cache. Carry build/src/capi/liblossjit_c.so.1.0.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
for s in 16384x32768 16384x32000 8192x49152; do
  LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1 timeout 170 python3 bench/row_variants.py --shape $s --dtype bfloat16 \
    --only cross-entropy --only "label smoothing" --only "class weights" --only "loss, z and accuracy" --only focal \
    --only "distillation KL" --variant default --variant row_cache=off --variant block=1024,unroll=4,row_cache=on \
    --variant block=512,unroll=8,row_cache=on
done > $OUT/bf16_variants.txt 2>&1
