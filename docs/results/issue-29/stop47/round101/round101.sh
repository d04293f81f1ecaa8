#!/bin/bash
# Round 101: shifted rows shared by a cluster's blocks (3 x 70001 in clusters of 4, cached and not),
# in the row cases that take cached_runs.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for T in '*reductions match the reference in every team*' '*fused value and gradients match*' '*gradients of maps that reduce*'; do
  timeout 240 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > $OUT/case.txt 2>&1; echo "rc $?" >> $OUT/case.txt; cat $OUT/case.txt >> $OUT/cases.txt; echo "$T"; grep -E "ERROR|rc |test cases|assertions| s: " $OUT/case.txt | head -6
done
