#!/bin/bash
# Round 108 (stop 49): branch row-factors on the GPU. The GPU cases that run row gradients, four
# processes side by side (correctness only; NVRTC is the cold cost), then the random programs on the
# GPU, then rf_time.py with main's library and the branch's alternating by process.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
BRANCH=$PWD/build/src/capi/liblossjit_c.so.1.0 MAIN=$PWD/build/main-bin/liblossjit_c.so.1.0
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
i=0
for T in '*fused value and gradients*' '*gradients of maps that reduce*' '*along other dimensions*' '*rows side by side kept in the row cache*' '*one value per row (*' '*class-weight gradients*'; do
  i=$((i+1)); (timeout 330 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > $OUT/case$i.txt 2>&1; echo "rc $? $T" >> $OUT/case$i.txt) &
done
(export LOSSJIT_LIBRARY=$BRANCH; timeout 330 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 108 --time-limit 240 --log $OUT/diff.txt > $OUT/diff_out.txt 2>&1; \
 timeout 80 python3 -u tests/differential/k_takes.py --device cuda --count 60 --seed 108 > $OUT/ktakes.txt 2>&1) &
wait
for f in $OUT/case*.txt; do grep -E "ERROR|rc |test cases|assertions" $f | head -5; done
tail -2 $OUT/diff_out.txt; tail -2 $OUT/ktakes.txt
