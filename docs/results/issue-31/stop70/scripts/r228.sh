#!/bin/bash
# Round 228 (stop 70, H200, the experiment build exp70/exp): (1) the GPU test of the row prefetch
# (clusters taking rows in turn among its runs); (2) rows a block alone on its SM keeps in part
# (8192 x 65536): the cross-entropy family's value and gradient, default against the prefetch asked for.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
ln -sf liblossjit_c.so.1.0 exp70/exp/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/exp70/exp/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c228
(LOSSJIT_CACHE_DIR=/tmp/c228t timeout 170 exp70/exp/lossjit_tests -tc="row programs: the row prefetch*" > $OUT/tests.txt 2>&1;
 echo "exit $?" >> $OUT/tests.txt) &
timeout 150 python3 bench/row_variants.py --shape 8192x65536 --reps 10 --only cross-entropy --only "class weights" \
  --only "label smoothing" --only focal --only "loss, z and accuracy" --variant default --variant row_prefetch=on > $OUT/part.txt 2>&1
wait
cat $OUT/part.txt
grep -E "test cases|assertions|^exit|ERROR" $OUT/tests.txt | head -20
