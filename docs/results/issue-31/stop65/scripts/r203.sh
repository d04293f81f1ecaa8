#!/bin/bash
# Round 203 (stop 65): a block a row against a warp a row for cached rows the warps keep most of
# (round 202: cross-entropy value + gradient 32768 x 4096 on an H100 at 86.6-88.1% of the floor with
# the defaults' warps, 90.7-90.8% with row_team=block). bench/row_variants.py, the defaults and
# row_team=block in turn, at shapes whose warps keep 50-100% of their row (4096 and 6144 columns);
# the knobs apply to the fused kernels and to both kernels of the maps.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_CACHE_DIR=/tmp/lj_cache
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
for s in 32768x4096 16384x6144; do
  timeout 200 python3 bench/row_variants.py --shape $s --reps 20 --variant default --variant row_team=block \
    --json $OUT/variants_$s.json > $OUT/variants_$s.txt 2>&1
  echo "exit $?" >> $OUT/variants_$s.txt
done
cat $OUT/variants_*.txt
