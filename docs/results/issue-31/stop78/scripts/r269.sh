#!/bin/bash
# Round 269 (stop 78, H200). (1) exp78/harness: main's printed cross-entropy value + gradient (N)
# beside stop 59's hand-written C at 16384 x 32768, three rounds. (2) Nsight Compute on one launch of
# each (source counters), summed by ncu_rows.py and listed line by line by sass_lines.py. (3) The GPU
# tests on main (174308c's plan-key refactor had not run on a GPU): the C++ gpu suite, test_capi gpu
# and the Python GPU tests, in parallel.
# Carry exp78, build/tests, build/lossjit, build/src/capi.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 80 exp78/harness 16384 32768 > $OUT/harness.txt 2>&1
LJ_PROFILE=1 timeout 150 ncu --clock-control none -k 'regex:lossjit_kernel|early_kernel' \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
  --section InstructionStats --section Occupancy --section LaunchStats --section SourceCounters \
  -o /tmp/r269 exp78/harness 16384 32768 > /tmp/ncu_run.txt 2>&1
ncu -i /tmp/r269.ncu-rep --page source --csv --print-source sass > /tmp/source.csv 2>&1
{ cat /tmp/ncu_run.txt; python3 exp78/ncu_rows.py /tmp/source.csv lossjit_kernel 'void early_kernel<(int)4>';
  ncu -i /tmp/r269.ncu-rep --print-details all; } > $OUT/ncu.txt 2>&1
python3 exp78/sass_lines.py /tmp/source.csv 524288 lossjit_kernel 'void early_kernel' > $OUT/sass_lines.txt 2>&1
export TORCH_EXTENSIONS_DIR=/tmp/ljx_ext LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
(LOSSJIT_CACHE_DIR=/tmp/c_a timeout 330 build/tests/lossjit_tests --test-suite=gpu > /tmp/t_cpp.txt 2>&1; echo "exit $?" >> /tmp/t_cpp.txt;
 LOSSJIT_CACHE_DIR=/tmp/c_c timeout 60 build/tests/test_capi gpu >> /tmp/t_cpp.txt 2>&1; echo "test_capi exit $?" >> /tmp/t_cpp.txt) &
(LOSSJIT_CACHE_DIR=/tmp/c_b timeout 330 python3 -m pytest -q -rs --tb=short -p no:cacheprovider python/tests/test_gpu.py \
  python/tests/test_native.py python/tests/test_cpu.py > /tmp/t_py.txt 2>&1; echo "exit $?" >> /tmp/t_py.txt) &
wait
{ cat /tmp/t_cpp.txt; echo; echo "=== python"; cat /tmp/t_py.txt; } > $OUT/tests.txt
grep -h -E "test cases|assertions|passed|failed|exit" $OUT/tests.txt; cat $OUT/harness.txt
