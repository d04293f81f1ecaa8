#!/bin/bash
# Round 186 (H200): the harness (A, P0, P5, P6, B, C) at two shapes; the fused row programs through the
# library as committed (walk ahead up to 512 threads) and through one built with
# ByRowWalkAheadMaxThreads' row at 1024 (exp61/ahead/, the printer's takes by their lanes), in turn;
# then, with that row at 1024 (exp61/lossjit_tests, exp61/lossjit), the GPU tests that run walked-ahead
# row kernels with takes, and the GPU random differential, in parallel. Carry exp61/harness,
# exp61/ahead/liblossjit_c.so.1.0, build/src/capi/liblossjit_c.so.1.0, exp61/lossjit_tests, exp61/lossjit.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
(cd exp61 && for s in "16384 32768" "16384 32000"; do timeout 60 ./harness $s; done) > $OUT/harness.txt 2>&1
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp61/ahead/liblossjit_c.so.1
for s in 16384x32768 16384x32000; do
  for lib in build/src/capi exp61/ahead build/src/capi exp61/ahead; do
    echo "== $s library $lib"
    LOSSJIT_LIBRARY=$PWD/$lib/liblossjit_c.so.1 timeout 60 python3 bench/row_variants.py --shape $s --reps 10 \
      --only cross-entropy --only "label smoothing" --only "class weights" --only "loss, z and accuracy" --only focal
  done
done > $OUT/programs.txt 2>&1
export LOSSJIT_LIBRARY=$PWD/exp61/ahead/liblossjit_c.so.1
i=0
for tc in "*fused value and gradients match*" "*row prefetch gives*" "*one value per row ([N, 1])*,*class-weight gradients*" \
          "*maps that reduce*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 230 exp61/lossjit_tests -tc="$tc" --duration=true > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 230 python3 -u tests/differential/differential.py --device cuda --count 200 \
   --seed 186 --time-limit 180 --cli exp61/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
