#!/bin/bash
# Round 272 (stop 78, H200): the C++ gpu suite's cases rounds 269-271 left unrun or cut off (each
# earlier round ran the suite beside Nsight Compute or the Python tests, under a time limit): the rows
# file's cases from "rows side by side kept in the row cache" on. Carry build/tests, build/lossjit,
# build/src/capi.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
LOSSJIT_CACHE_DIR=/tmp/c_a timeout 290 build/tests/lossjit_tests --test-suite=gpu --source-file='*test_gpu_rows.cpp' \
   -tc='*rows side by side kept in the row cache*,*gradient of amax and amin reaches*,*takes of K indices per row*,*GPU known by name runs*' \
   --duration=true > $OUT/tests.txt 2>&1; echo "exit $?" >> $OUT/tests.txt
grep -h -E "^[0-9.]+ s:|test cases|assertions|exit|CRASH|ERROR" $OUT/tests.txt
