#!/bin/bash
# Round 189 (stop 62, H200). (1) The harness at 16384 x 32768 and 16384 x 32000: A (the printed
# copies), P6, P7 (round 188), P9 (stop 62's printer: the take's slot parity carried in Ahead instead
# of a 64-bit division a row, whose call made every lane wait for the loads in flight at each row's
# start: round 188's ncu) and P10 (P9 with the index a row ahead), B, C. (2) The fused row programs
# through the committed library (exp62/head) and stop 62's printer with ByRowWalkAheadMaxThreads' row
# at 1024 (exp62/ahead9), in turn. (3) With that printer at 1024 (exp62/lossjit_tests9,
# exp62/lossjit9): the GPU tests that run walked-ahead row kernels with takes and the GPU random
# differential, in parallel.
# Build here first: exp62/ as round 188's r188.sh says, then with stop 62's printer (the row at 1024)
# `lossjit emit` of the cross-entropy as there into exp62/p9.cu, k_p9.cuh and tu_p9.cu as
# ../../stop61/scripts/build.sh makes them, python3 p10_edit.py in exp62/, nvcc ... -o harness
# harness.cu tu_p6.cu tu_p7.cu tu_p9.cu tu_p10.cu; that printer's liblossjit_c.so.1.0, lossjit and
# lossjit_tests into exp62/ahead9/, exp62/lossjit9, exp62/lossjit_tests9. Carry exp62/harness,
# exp62/head/liblossjit_c.so.1.0, exp62/ahead9/liblossjit_c.so.1.0, exp62/lossjit9, exp62/lossjit_tests9.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
(for s in "16384 32768" "16384 32000"; do timeout 90 exp62/harness $s; done) > $OUT/harness.txt 2>&1
ln -sf liblossjit_c.so.1.0 exp62/head/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp62/ahead9/liblossjit_c.so.1
for s in 16384x32768 16384x32000; do
  for lib in head ahead9 head ahead9; do
    echo "== $s library $lib"
    LOSSJIT_LIBRARY=$PWD/exp62/$lib/liblossjit_c.so.1 timeout 50 python3 bench/row_variants.py --shape $s --reps 10 \
      --only cross-entropy --only "label smoothing" --only "class weights" --only "loss, z and accuracy" --only focal
  done
done > $OUT/programs.txt 2>&1
export LOSSJIT_LIBRARY=$PWD/exp62/ahead9/liblossjit_c.so.1
i=0
for tc in "*fused value and gradients match*" "*row prefetch gives*" "*one value per row ([N, 1])*,*class-weight gradients*" \
          "*maps that reduce*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 230 exp62/lossjit_tests9 -tc="$tc" --duration=true > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 230 python3 -u tests/differential/differential.py --device cuda --count 200 \
   --seed 189 --time-limit 180 --cli exp62/lossjit9 > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
