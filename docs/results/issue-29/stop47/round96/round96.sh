#!/bin/bash
# Round 96: amax / amin elements without FMA contraction: the new GPU case on the fixed build and on
# one whose printer does not round (expected to fail); the row GPU cases; the random programs.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
T='*gradient of amax and amin reaches*'
timeout 100 build/tests/lossjit_tests -ts=gpu -tc="$T" > $OUT/new_case.txt 2>&1; echo "rc $?" >> $OUT/new_case.txt; tail -4 $OUT/new_case.txt
LOSSJIT_CACHE_DIR=/tmp/ljcache_old timeout 100 build/ab/lossjit_tests_unrounded -ts=gpu -tc="$T" > $OUT/unrounded_case.txt 2>&1; echo "rc $?" >> $OUT/unrounded_case.txt; grep -c "ERROR" $OUT/unrounded_case.txt; tail -4 $OUT/unrounded_case.txt
timeout 100 python3 tests/differential/k_takes.py --device cuda --count 60 --seed 93 --log $OUT/ktakes.txt 2>&1 | tail -2
timeout 330 build/tests/lossjit_tests -ts=gpu -tc="*every row of the language table*,*reductions match the reference in every team*,*fused value and gradients match*,*takes of K indices*,*gradients of maps that reduce*" > $OUT/gpu_rows.txt 2>&1; echo "rc $?" >> $OUT/gpu_rows.txt; tail -5 $OUT/gpu_rows.txt
