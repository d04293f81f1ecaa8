#!/bin/bash
# Round 165 (H100): 1024 threads for fused value-and-gradient kernels whose block keeps a row alone
# on its SM (ByRowAloneGradientThreads), and the next row's index asked of L2 with the prefetch:
# HEAD's library (build-old) against the change, alternating, on the row benchmark and on the
# cross-entropy family, distillation and the row maps' forward and backward.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
O=$OUT/r165; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 build-old/src/capi/liblossjit_c.so.1
for r in 1 2; do
  LOSSJIT_CACHE_DIR=/tmp/c_old timeout 140 build-old/bench/lossjit_bench --rows --reps 10 --examples examples --no-accuracy > $O/old$r.txt 2>&1
  LOSSJIT_CACHE_DIR=/tmp/c_new timeout 140 build/bench/lossjit_bench --rows --reps 10 --no-accuracy > $O/new$r.txt 2>&1
done
n=0
for s in 16384x32000 16384x32000 16384x32768 8192x49152; do
  n=$((n + 1))
  for v in old new; do
    b=build; [ $v = old ] && b=build-old
    LOSSJIT_LIBRARY=$PWD/$b/src/capi/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c_$v timeout 100 python3 bench/row_variants.py \
      --shape $s --reps 20 --variant default --json $O/${v}_$s-$n.json > $O/${v}_$s-$n.txt 2>&1
  done
done
cd $OUT && tar czf r165.tgz r165 && rm -rf r165
