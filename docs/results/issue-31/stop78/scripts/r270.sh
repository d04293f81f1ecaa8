#!/bin/bash
# Round 270 (stop 78, H200). (1) exp78/harness at 16384 x 32768, three rounds: main's printed
# cross-entropy value + gradient (N), N with the next row's index loaded after the row's merges
# (Nb, k_nb.cuh: round 269's Nsight Compute put 8.0k long-scoreboard samples on that load between
# the merges' two barriers and 13.2k barrier samples after the second), stop 59's hand-written C.
# (2) Nsight Compute on one launch of each (source counters), summed by ncu_rows.py and listed line
# by line by sass_lines.py; beside it (3) the C++ gpu suite's cases round 269 cut off (its time limit
# stopped "fused value and gradients" and left the rows file's cases after it unrun).
# Carry exp78, build/tests, build/lossjit, build/src/capi.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 100 exp78/harness 16384 32768 > $OUT/harness.txt 2>&1
(LOSSJIT_CACHE_DIR=/tmp/c_a timeout 420 build/tests/lossjit_tests --test-suite=gpu \
   --source-file-exclude='*test_gpu.cpp,*test_gpu_dtypes.cpp,*test_gpu_knobs.cpp' --duration=true > /tmp/t_cpp.txt 2>&1;
 echo "exit $?" >> /tmp/t_cpp.txt) &
LJ_PROFILE=1 timeout 200 ncu --clock-control none -k 'regex:lossjit_kernel|early_kernel' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
  --section InstructionStats --section LaunchStats --section SourceCounters \
  -o /tmp/r270 exp78/harness 16384 32768 > /tmp/ncu_run.txt 2>&1
ncu -i /tmp/r270.ncu-rep --page source --csv --print-source sass > /tmp/source.csv 2>&1
{ cat /tmp/ncu_run.txt; python3 exp78/ncu_rows.py /tmp/source.csv lossjit_kernel lossjit_kernel_nb 'void early_kernel<(int)4>';
  ncu -i /tmp/r270.ncu-rep --print-details all; } > $OUT/ncu.txt 2>&1
python3 exp78/sass_lines.py /tmp/source.csv 524288 lossjit_kernel lossjit_kernel_nb 'void early_kernel<(int)4>' > $OUT/sass_lines.txt 2>&1
wait
cp /tmp/t_cpp.txt $OUT/tests.txt
grep -h -E "test cases|assertions|exit" $OUT/tests.txt; head -12 $OUT/ncu.txt | grep -v PROF; cat $OUT/harness.txt
