#!/bin/bash
# Round 171 (H200): the GPU row tests the change touches, on this GPU's defaults (the prefetch now
# automatic for a block alone on its SM): fused values and gradients, [N, 1] inputs and class
# weights, maps that reduce; then the GPU random-program differential. Each step writes its own file.
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
t=build/tests/lossjit_tests
LOSSJIT_CACHE_DIR=/tmp/c1 timeout 240 $t --duration=true -tc="row programs: fused value and gradients*" > $OUT/tests_fused.txt 2>&1; echo "exit $?" >> $OUT/tests_fused.txt
LOSSJIT_CACHE_DIR=/tmp/c2 timeout 90 $t --duration=true -tc="row programs: the gradient of an input of one value per row*,row programs: class-weight*" > $OUT/tests_n1_weights.txt 2>&1; echo "exit $?" >> $OUT/tests_n1_weights.txt
LOSSJIT_CACHE_DIR=/tmp/c3 timeout 80 $t --duration=true -tc="row programs: gradients of maps that reduce*" > $OUT/tests_maps.txt 2>&1; echo "exit $?" >> $OUT/tests_maps.txt
LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c4 timeout 100 python3 tests/differential/differential.py --device cuda --count 600 --seed 5801 --time-limit 80 --cli build/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt
