#!/bin/bash
# Round 107 (H200): d02d7ba's side-by-side row cache: its GPU case, the fused value-and-gradient
# cases (block teams' caches, now placed by the team), KernelBench 36 against torch.compile.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for T in '*rows side by side kept in the row cache*' '*fused value and gradients match*'; do
  timeout 200 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > $OUT/case.txt 2>&1; echo "rc $?" >> $OUT/case.txt; cat $OUT/case.txt >> $OUT/cases.txt; echo "$T"; grep -E "ERROR|rc |test cases|assertions| s: " $OUT/case.txt | head -6
done
timeout 120 python3 -u docs/results/issue-29/stop48/round105/side_cache.py rms 2>&1 | grep -v -i warn | tail -2
