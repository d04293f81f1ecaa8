#!/bin/bash
# Round 163 (H200): 1024 threads and the row prefetch for rows a block takes alone on its SM (the
# cache fills it), across the row programs; HEAD (build-old) against the next row's index asked of L2.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
O=$OUT/r163; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
V="--variant row_cache=auto --variant block=1024 --variant row_prefetch=on --variant block=1024,row_prefetch=on"
for r in 1 2; do
  LOSSJIT_CACHE_DIR=/tmp/c_old timeout 150 build-old/bench/lossjit_bench --rows --reps 10 --examples examples --no-accuracy \
    --only "cross_entropy 16384x32768" --only "cosine 16384x16384" $V > $O/old_variants$r.txt 2>&1
  LOSSJIT_CACHE_DIR=/tmp/c_new timeout 150 build/bench/lossjit_bench --rows --reps 10 --no-accuracy \
    --only "cross_entropy 16384x32768" --only "cosine 16384x16384" $V > $O/new_variants$r.txt 2>&1
done
PV="--variant default --variant block=1024 --variant row_prefetch=on --variant block=1024,row_prefetch=on"
for s in 16384x32768 16384x32000 8192x49152; do
  LOSSJIT_CACHE_DIR=/tmp/c_new timeout 200 python3 bench/row_variants.py --shape $s --reps 20 $PV --json $O/programs_$s.json > $O/programs_$s.txt 2>&1
done
cd $OUT && tar czf r163.tgz r163 && rm -rf r163
