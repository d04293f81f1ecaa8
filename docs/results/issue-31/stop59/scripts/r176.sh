#!/bin/bash
# Round 176 (H200): the walk ahead. exp59/harness (HEAD's emitted cross-entropy value + gradient
# kernel, "A", against the change's, "D", and the hand-written forms B and C) at three shapes;
# lossjit_bench --rows, HEAD's (build-old) and the change's in turn, two rounds; bench/row_variants.py
# at three vocabularies, each library; the GPU test of the prefetch on and off.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
(cd exp59 && for s in "16384 32768" "16384 32000" "8192 49152"; do ./harness $s; done) > $OUT/harness.txt 2>&1
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 build-old/src/capi/liblossjit_c.so.1
for r in 1 2; do
  for v in old new; do
    b=build; [ $v = old ] && b=build-old
    echo "== round $r: $v" >> $OUT/rows.txt
    LOSSJIT_CACHE_DIR=/tmp/c_$v timeout 60 $b/bench/lossjit_bench --rows --reps 10 --no-accuracy --examples examples 2>&1 | head -12 >> $OUT/rows.txt
  done
done
for s in 16384x32000 16384x32768 8192x49152; do
  for v in old new; do
    b=build; [ $v = old ] && b=build-old
    echo "== $s: $v" >> $OUT/variants.txt
    LOSSJIT_LIBRARY=$PWD/$b/src/capi/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c_$v timeout 60 python3 bench/row_variants.py \
      --shape $s --reps 20 --variant default >> $OUT/variants.txt 2>&1
  done
done
LOSSJIT_CACHE_DIR=/tmp/c_tests timeout 150 build/tests/lossjit_tests -tc="row programs: the row prefetch*" > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
