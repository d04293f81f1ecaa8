#!/bin/bash
# Round 183 (H200): the harness (A, P0, P5, B, C), then the fused row programs through the library as
# committed (walk ahead up to 512 threads) and through one built with ByRowWalkAheadMaxThreads' row at
# 1024 (exp61/ahead/), twice each in turn. Carry exp61/harness, exp61/ahead/liblossjit_c.so.1.0,
# build/src/capi/liblossjit_c.so.1.0.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
(cd exp61 && for s in "16384 32768" "16384 32000" "8192 49152"; do timeout 150 ./harness $s; done) > $OUT/harness.txt 2>&1
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp61/ahead/liblossjit_c.so.1
for s in 16384x32768 16384x32000; do
  for round in 1 2; do
    for lib in build/src/capi exp61/ahead; do
      echo "== $s round $round library $lib"
      LOSSJIT_LIBRARY=$PWD/$lib/liblossjit_c.so.1 timeout 120 python3 bench/row_variants.py --shape $s \
        --only cross-entropy --only "label smoothing" --only "class weights" --only "loss, z and accuracy" --only focal
    done
  done
done > $OUT/programs.txt 2>&1
