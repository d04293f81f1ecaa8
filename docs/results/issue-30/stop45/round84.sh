#!/bin/bash
# Round 84 (the command given to the device inline): the gpu suite's row-program cases, on the machine
# round 83 had warmed (its kernel cache), after round 82's whole suite ran past its limit.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
timeout 470 build/tests/lossjit_tests -ts=gpu -tc="row programs*" -d > $OUT/cpp.txt 2>&1; echo "rc $?" >> $OUT/cpp.txt
