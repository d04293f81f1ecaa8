#!/bin/bash
# Round 121 (H100): a division per element by a value per row through the row's reciprocal, and no
# value total in a map's gradient kernel. The GPU cases of the row programs and the language table, the
# random programs on the GPU, then the Python package's GPU tests. Carry build/{src/capi/liblossjit_c.so.1.0,
# lossjit,tests/lossjit_tests}.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
mkdir -p /tmp/r; nvidia-smi --query-gpu=name --format=csv,noheader
i=0
for T in 'row programs: reductions match*' 'row programs: a mean and the squared*' 'row programs: fused value and gradients*' \
         'row programs: gradients of maps that reduce*' 'row programs along other dimensions*' 'row programs: rows side by side*' \
         'every row of the language table*' 'the backward of a map*'; do
  i=$((i+1)); (timeout 240 build/tests/lossjit_tests -ts=gpu -tc="$T" > /tmp/r/case$i.txt 2>&1; echo "rc $? $T" >> /tmp/r/case$i.txt) &
done
(timeout 240 python3 -u tests/differential/differential.py --device cuda --count 400 --seed 121 --time-limit 190 --log /tmp/r/diff.txt > /tmp/r/diff_out.txt 2>&1) &
wait
for f in /tmp/r/case*.txt; do grep -E "ERROR|rc |test cases|assertions" $f | head -6; done
head -2 /tmp/r/diff_out.txt; grep -A3 "fails" /tmp/r/diff_out.txt | head -8; tail -2 /tmp/r/diff_out.txt
cat /tmp/r/case*.txt > $OUT/cases.txt; cp /tmp/r/diff_out.txt $OUT/differential.txt
timeout 200 python3 -m pytest -q -rfs -p no:cacheprovider python/tests/test_gpu.py 2>&1 | tail -6 | tee $OUT/pytest.txt
