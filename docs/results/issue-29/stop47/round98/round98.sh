#!/bin/bash
# Round 98: the row GPU cases that walk rows not a multiple of 4 (300x1001, 1x7, 40x50257), the
# language table, and the random programs.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for T in '*reductions match the reference in every team*' '*fused value and gradients match*' '*takes of K indices*' '*gradients of maps that reduce*' '*every row of the language table*' '*of one value per row ([N, 1])*'; do
  timeout 150 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > $OUT/case.txt 2>&1; echo "rc $?" >> $OUT/case.txt; cat $OUT/case.txt >> $OUT/cases.txt; echo "$T"; grep -E "ERROR|rc |test cases" $OUT/case.txt | head -5
done
timeout 150 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 98 --time-limit 100 --log $OUT/diff.txt > $OUT/diff_out.txt 2>&1; tail -3 $OUT/diff_out.txt
