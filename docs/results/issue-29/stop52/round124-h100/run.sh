#!/bin/bash
# Round 124 (H100): axis.py. Carry build/src/capi/liblossjit_c.so.1.0.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 -u docs/results/issue-29/stop52/round124-h100/axis.py 2>&1 | grep -v -i warn | tee $OUT/axis.txt
