#!/bin/bash
# Round 224 (stop 69, H200): main's head (exp69/new: the shift fix and the picked take): program 116
# of seed 222 alone, then the GPU random differential of seed 222 from its start, and the GPU tests
# of rows that do not start on a vector boundary, in parallel.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
ln -sf liblossjit_c.so.1.0 exp69/new/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/exp69/new/liblossjit_c.so.1
LOSSJIT_CACHE_DIR=/tmp/c116 timeout 60 python3 -u tests/differential/differential.py --device cuda --seed 222 --only 116 \
  --cli exp69/new/lossjit > $OUT/only116.txt 2>&1; echo "exit $?" >> $OUT/only116.txt
tail -3 $OUT/only116.txt
(LOSSJIT_CACHE_DIR=/tmp/c_t timeout 200 exp69/new/lossjit_tests -tc="row programs: fused value*,row programs: a take picked*" \
   > $OUT/tests.txt 2>&1; echo "exit $?" >> $OUT/tests.txt) &
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 230 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 222 --time-limit 200 --cli exp69/new/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
grep -h -E "test cases|assertions|^exit" $OUT/tests.txt
tail -4 $OUT/differential.txt
