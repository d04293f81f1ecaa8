#!/bin/bash
# Round 105: the side-by-side row cache's GPU cases and the row cases that run rows side by side;
# random programs on the GPU; side_cache.py (KernelBench 36, RMS norm fwd+bwd, K-dimensional
# cross-entropy against torch.compile).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for T in '*rows side by side kept in the row cache*' '*row programs along other dimensions*' '*one value per row (*' '*class-weight gradients*' '*gradients of maps that reduce*'; do
  timeout 200 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > $OUT/case.txt 2>&1; echo "rc $?" >> $OUT/case.txt; cat $OUT/case.txt >> $OUT/cases.txt; echo "$T"; grep -E "ERROR|rc |test cases|assertions| s: " $OUT/case.txt | head -6
done
timeout 150 python3 -u docs/results/issue-29/stop48/round105/side_cache.py 2>&1 | grep -v Warning | tail -8
timeout 90 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 105 --time-limit 70 --log $OUT/diff.txt 2>&1 | tail -2
