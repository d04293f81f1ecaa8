#!/bin/bash
# Round 192 (stop 63, H200): a take's adjoint summed along the row in closed form (inrow(y) ? a : 0,
# differentiate.cpp's one_hot_select) instead of a walk: focal's gradient kernel walks each row twice
# instead of three times, label smoothing's first walk no longer sums it. (1) The fused row programs
# through the committed library (exp63/head) and this change's (exp63/closed), in turn, at three
# shapes. (2) With this change's test binary and CLI: the GPU tests that run fused row kernels, the
# GPU random differential, in parallel.
# Build here first, from the repository root: the committed build's liblossjit_c.so.1.0 into
# exp63/head/; with the change, liblossjit_c.so.1.0, lossjit and tests/lossjit_tests into exp63/closed/.
# Carry exp63/head/liblossjit_c.so.1.0, exp63/closed/liblossjit_c.so.1.0, exp63/closed/lossjit,
# exp63/closed/lossjit_tests. `bash r192.sh programs`, then `bash r192.sh tests` (two calls).
part=${1:-all}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
ln -sf liblossjit_c.so.1.0 exp63/head/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp63/closed/liblossjit_c.so.1
if [ "$part" != tests ]; then
for s in 16384x32768 16384x32000 8192x49152; do
  for lib in head closed head closed; do
    echo "== $s library $lib"
    LOSSJIT_LIBRARY=$PWD/exp63/$lib/liblossjit_c.so.1 timeout 50 python3 bench/row_variants.py --shape $s --reps 10 \
      --only cross-entropy --only "label smoothing" --only "loss, z and accuracy" --only focal
  done
done > $OUT/programs.txt 2>&1
for lib in head closed head closed; do
  echo "== 16384x32768 bfloat16 library $lib"
  LOSSJIT_LIBRARY=$PWD/exp63/$lib/liblossjit_c.so.1 timeout 50 python3 bench/row_variants.py --shape 16384x32768 --reps 10 \
    --dtype bfloat16 --only "label smoothing" --only focal
done >> $OUT/programs.txt 2>&1
fi
[ "$part" = programs ] && exit 0
export LOSSJIT_LIBRARY=$PWD/exp63/closed/liblossjit_c.so.1
i=0
for tc in "*fused value and gradients match*" "*row prefetch gives*" "*one value per row ([N, 1])*,*class-weight gradients*" \
          "*maps that reduce*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 400 exp63/closed/lossjit_tests -tc="$tc" --duration=true > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 330 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 192 --time-limit 300 --cli exp63/closed/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
