#!/bin/bash
# Round 169 (H200): the row prefetch for the fused kernels whose block is alone on its SM (1024
# threads since stop 57) against the defaults, alternating: lossjit_bench --rows and
# bench/row_variants.py at three vocabularies; and KL against torch.compile, three seeds.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c_new
timeout 150 python3 docs/results/issue-31/stop58/scripts/kl_vs_compile.py > $OUT/kl_vs_compile.txt 2>&1
timeout 200 build/bench/lossjit_bench --rows --reps 10 --no-accuracy --variant row_cache=auto --variant row_prefetch=on > $OUT/rows.txt 2>&1
for s in 16384x32000 16384x32768 8192x49152; do
  timeout 150 python3 bench/row_variants.py --shape $s --reps 20 --variant default --variant row_prefetch=on >> $OUT/variants.txt 2>&1
done
