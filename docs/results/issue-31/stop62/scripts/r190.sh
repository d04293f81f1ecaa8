#!/bin/bash
# Round 190 (stop 62, H200; 326 s of device time were left, so the tests get 150 s). (1) The harness
# at 16384 x 32768: A, P6, P9 (stop 62's printer), P10 (P9, the index a row ahead), P12 (P10, the
# take picked out of the walk ahead as C does: p12_edit.py), B, C. (2) The fused values-and-gradients
# GPU test with stop 62's printer
# at the committed defaults (exp62/committed/lossjit_tests) and with ByRowWalkAheadMaxThreads' row at
# 1024 (exp62/lossjit_tests9; round 189's run of it reached its time limit after 958 assertions, all
# passed), in parallel.
# Build here first: exp62/ as r189.sh says, python3 p12_edit.py in exp62/, nvcc ... -o harness
# harness.cu tu_p6.cu tu_p9.cu tu_p10.cu tu_p12.cu; stop 62's build/tests/lossjit_tests
# into exp62/committed/. Carry exp62/harness, exp62/lossjit_tests9, exp62/committed/lossjit_tests.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 50 exp62/harness 16384 32768 > $OUT/harness.txt 2>&1
tc="*fused value and gradients match*"
(LOSSJIT_CACHE_DIR=/tmp/c_a timeout 150 exp62/committed/lossjit_tests -tc="$tc" --duration=true > $OUT/tests_committed.txt 2>&1;
 echo "exit $?" >> $OUT/tests_committed.txt) &
(LOSSJIT_CACHE_DIR=/tmp/c_b timeout 150 exp62/lossjit_tests9 -tc="$tc" --duration=true > $OUT/tests_1024.txt 2>&1;
 echo "exit $?" >> $OUT/tests_1024.txt) &
wait
grep -h -E "test cases|assertions|exit" $OUT/tests_*.txt
