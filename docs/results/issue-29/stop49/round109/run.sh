#!/bin/bash
# Round 109 (stop 49): row sums of gradients split into terms (layer norm: three walks) on the GPU.
# The GPU cases that run row gradients, side by side (correctness only; NVRTC is the cold cost), the
# random programs on the GPU; then (time.sh) ln_time.py and few_rows.py's KernelBench 40 with main's
# library and the new one, alternating by process.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
mkdir -p /tmp/r109
nvidia-smi --query-gpu=name --format=csv,noheader > /tmp/r109/0gpu.txt
i=0
for T in '*fused value and gradients*' '*gradients of maps that reduce*' '*along other dimensions*' '*rows side by side kept in the row cache*' '*one value per row (*' '*class-weight gradients*'; do
  i=$((i+1)); (timeout 330 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > /tmp/r109/case$i.txt 2>&1; echo "rc $? $T" >> /tmp/r109/case$i.txt) &
done
(export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0; timeout 330 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 109 --time-limit 240 --log /tmp/r109/diff.txt > /tmp/r109/diff_out.txt 2>&1; \
 timeout 80 python3 -u tests/differential/k_takes.py --device cuda --count 60 --seed 109 > /tmp/r109/ktakes.txt 2>&1; echo "rc $?" >> /tmp/r109/ktakes.txt) &
wait
cat /tmp/r109/*.txt > $OUT/all.txt
for f in /tmp/r109/case*.txt; do grep -E "ERROR|rc |test cases|assertions" $f | head -5; done
head -3 /tmp/r109/diff_out.txt; tail -1 /tmp/r109/diff_out.txt; tail -3 /tmp/r109/ktakes.txt
