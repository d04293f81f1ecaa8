#!/bin/bash
# Round 82: the whole GPU suite at 8c65afd (x[k]'s kernels, and everything else still as before).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
timeout 560 build/tests/lossjit_tests -ts=gpu > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
grep -E "ERROR|test cases|assertions|rc " $OUT/cpp.txt | head -30
