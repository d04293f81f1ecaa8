#!/bin/bash
# Round 138 (one GPU a call): the row prefetch automatic for layer norm (ByRowPrefetchCentered):
# layer norm and RMS norm maps off / on (`lossjit bench --sweep`), layer norm forward + backward
# from Python off / on beside F.layer_norm, then the GPU test of the prefetch's values and gradients.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
timeout 200 build/tests/lossjit_tests -ts=gpu -tc="row programs: the row prefetch*" > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
python3 docs/results/issue-31/stop54/layer_norm_grad.py > $OUT/layer_norm_grad.txt 2>&1
for p in "m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)" "x / sqrt(mean(x * x, -1) + 1e-6)"; do
  for shape in 32768x4096 8192x16384; do
    echo "== $p $shape" >> $OUT/maps.txt
    build/lossjit bench "$p" -i x=$shape:normal --reps 20 --sets 1 -q --sweep row_prefetch=off,on >> $OUT/maps.txt 2>&1
  done
done
