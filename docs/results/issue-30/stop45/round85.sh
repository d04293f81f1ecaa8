#!/bin/bash
# Round 85: takes of expressions distributed over their inputs ((x - lse)[k] as x[k] - lse) in the
# differentiated program: the gpu K case (with log_softmax taken, and nan rows through (x > 0)[k]),
# the Python top-k test, and random K programs on the GPU against torch.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
timeout 170 build/tests/lossjit_tests -ts=gpu -tc="*takes of K indices*" -d > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
grep -E "ERROR|test cases|assertions|rc |s: row" $OUT/cpp.txt | head -20
(cd python && timeout 60 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_gpu.py -k "top_k" 2>&1 | grep -v "^DEBUG" | tail -3) > $OUT/py.txt 2>&1
cat $OUT/py.txt
timeout 110 python3 tests/differential/k_takes.py --device cuda --count 40 --seed 85 > $OUT/k_takes.txt 2>&1; echo "k_takes rc $?" >> $OUT/k_takes.txt
tail -8 $OUT/k_takes.txt
