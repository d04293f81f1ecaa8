#!/bin/bash
# Round 120 (H100): the GPU pytest at main's HEAD (the eager fused kernel in forward or in backward,
# both ways in each eager gradient test), then `lossjit tune` of softmax over 32768 x 4096 with the
# default axes (now row_team=warp,block and block 128 among them). Carry
# build/src/capi/liblossjit_c.so.1.0 and build/lossjit.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 240 python3 -m pytest -q -rfs -p no:cacheprovider python/tests/test_gpu.py 2>&1 | grep -v -i "warn\|^  \|^$" | tail -12 | tee $OUT/pytest.txt
timeout 300 build/lossjit tune 'exp(x - logsumexp(x, -1))' -i x=32768x4096:normal --reps 10 --sets 1 -q > $OUT/tune.txt 2>&1
echo "tune rc $?"; head -5 $OUT/tune.txt; grep -n "row_team=block" $OUT/tune.txt | head -5; tail -8 $OUT/tune.txt
