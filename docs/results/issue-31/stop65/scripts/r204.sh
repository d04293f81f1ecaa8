#!/bin/bash
# Round 204 (stop 65): distillation's gradient without its factor kernel (a composite program's
# derivative by `batchmean(...)` is T^2, a number of its parameter, now folded into the derivatives:
# before, a forward pass read s and t once more first). bench/row_variants.py --only "distillation KL"
# with the library before (exp64/final: main at e9618ed's kernels) and after (exp65/fold), in turn,
# twice, at two shapes; knob variants of the new kernel; then the GPU tests of fused row gradients
# and the GPU random differential with the new build. Carry exp64/final and exp65/fold.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
for d in exp64/final exp65/fold; do ln -sf liblossjit_c.so.1.0 $d/liblossjit_c.so.1; done
for s in 32768x4096 16384x32000; do
  for lib in exp64/final exp65/fold exp64/final exp65/fold; do
    LOSSJIT_CACHE_DIR=/tmp/c_$(basename $lib) LOSSJIT_LIBRARY=$PWD/$lib/liblossjit_c.so.1 timeout 60 python3 \
      bench/row_variants.py --shape $s --reps 20 --only "distillation KL" 2>&1 | sed "s|^|$lib |"
  done
done > $OUT/before_after.txt
cat $OUT/before_after.txt
LOSSJIT_CACHE_DIR=/tmp/c_fold LOSSJIT_LIBRARY=$PWD/exp65/fold/liblossjit_c.so.1 timeout 120 python3 bench/row_variants.py \
  --shape 32768x4096 --reps 20 --only "distillation KL" --variant default --variant block=256 --variant block=512 \
  --variant block=1024 --variant row_cache=off --variant unroll=2 --variant acc=float32 > $OUT/variants.txt 2>&1
cat $OUT/variants.txt
export LOSSJIT_LIBRARY=$PWD/exp65/fold/liblossjit_c.so.1
(LOSSJIT_CACHE_DIR=/tmp/c_t timeout 250 exp65/fold/lossjit_tests -tc="*fused value and gradients match*" --duration=true \
   > $OUT/tests.txt 2>&1; echo "exit $?" >> $OUT/tests.txt) &
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 250 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 204 --time-limit 220 --cli exp65/fold/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
