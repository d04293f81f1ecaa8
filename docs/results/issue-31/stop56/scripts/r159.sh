#!/bin/bash
# Round 159 (H200): the GPU row tests on the instruction diet, first half.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
O=$OUT/r159; mkdir -p $O
timeout 560 build/tests/lossjit_tests --duration=true -tc="$1" > $O/gpu_tests_$2.txt 2>&1; echo "exit $?" >> $O/gpu_tests_$2.txt
tail -4 $O/gpu_tests_$2.txt
