#!/bin/bash
# Round 123 (H100, the final library): the Python GPU test of maps that reduce under autograd against
# torch's backward (now also layer norm, L1/L2 normalize, reductions along an axis as maps), then every
# KernelBench problem at its own shapes (bench/kernelbench.py; the problems' files carried in build/kb,
# ScalingIntelligence/KernelBench 423217d). Carry build/{src/capi/liblossjit_c.so.1.0,kb}.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
timeout 80 python3 -m pytest -q -rfs -p no:cacheprovider python/tests/test_gpu.py -k maps_that_reduce 2>&1 | tail -4 | tee $OUT/pytest.txt
timeout 320 python3 -u bench/kernelbench.py --kernelbench build/kb/KernelBench/level1 --device cuda --rounds 3 --reps 10 \
  --json $OUT/kernelbench.json --time-limit 290 2>&1 | grep -v -i warn | tee $OUT/kernelbench.txt
