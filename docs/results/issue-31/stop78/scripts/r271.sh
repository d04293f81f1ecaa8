#!/bin/bash
# Round 271 (stop 78, H200). (1) exp78/harness at 16384 x 32768, three rounds: N (main's printed
# cross-entropy value + gradient), Nb (round 270: the index after the merges, slower), Ns (the
# gradient's seed a RowProgram member the kernel sets once, as the printer can print it: /tmp/exp/ce_a.cu),
# Nq (the seed read once into shared memory, each row reads it there), C (hand-written). Round 270's
# Nsight Compute put N's and Nb's long-scoreboard waits inside the merges on the seed's loads (upstream
# and factor pointers, predicated off here, whose wait masks hold anyway) and the index load behind them.
# (2) Nsight Compute on Ns and Nq; beside it (3) the C++ gpu suite's cases rounds 269-270 left unrun.
# Carry exp78, build/tests, build/lossjit, build/src/capi.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
timeout 120 exp78/harness 16384 32768 > $OUT/harness.txt 2>&1
(LOSSJIT_CACHE_DIR=/tmp/c_a timeout 400 build/tests/lossjit_tests --test-suite=gpu --source-file='*test_gpu_rows.cpp' \
   -tce='*every team and access width*,*share an accumulator*,*squared deviations*,*group norm*,*out-of-range indices*,*several inputs along a block*,*rank 3*,*fused value and gradients match*,*take picked out*,*one value per row*,*class-weight gradients*' \
   --duration=true > /tmp/t_cpp.txt 2>&1; echo "exit $?" >> /tmp/t_cpp.txt) &
LJ_PROFILE=1 timeout 200 ncu --clock-control none -k 'regex:lossjit_kernel_n[sq]' \
  --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  -o /tmp/r271 exp78/harness 16384 32768 > /tmp/ncu_run.txt 2>&1
ncu -i /tmp/r271.ncu-rep --page source --csv --print-source sass > /tmp/source.csv 2>&1
{ cat /tmp/ncu_run.txt; python3 exp78/ncu_rows.py /tmp/source.csv lossjit_kernel_ns lossjit_kernel_nq; } > $OUT/ncu.txt 2>&1
python3 exp78/sass_lines.py /tmp/source.csv 524288 lossjit_kernel_ns lossjit_kernel_nq > $OUT/sass_lines.txt 2>&1
wait
cp /tmp/t_cpp.txt $OUT/tests.txt
grep -h -E "test cases|assertions|exit|CRASH|ERROR" $OUT/tests.txt; grep -v PROF $OUT/ncu.txt | head -30; cat $OUT/harness.txt
