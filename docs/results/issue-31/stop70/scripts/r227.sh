#!/bin/bash
# Round 227 (stop 70, H200): r227.py (clusters taking rows in turn with the row prefetch) at four
# shapes, the experiment build (exp70/exp: main + clusters prefetch when asked, the grid from
# cuOccupancyMaxActiveClusters, LOSSJIT_EXP_CLUSTER_BPS).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
ln -sf liblossjit_c.so.1.0 exp70/exp/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/exp70/exp/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c227
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
for s in 4096x131072 4096x128256 8192x65536 2048x262144; do
  timeout 100 python3 docs/results/issue-31/stop70/scripts/r227.py --shape $s --reps 10 2>&1
done > $OUT/clusters.txt
cat $OUT/clusters.txt
# The family and the maps at 4096 x 131072 (clusters of 4 by default), the prefetch asked for.
timeout 120 python3 bench/row_variants.py --shape 4096x131072 --reps 10 --only "class weights" --only "label smoothing" \
  --only focal --only softmax --only log_softmax --variant default --variant row_prefetch=on > $OUT/family.txt 2>&1
cat $OUT/family.txt
# The GPU tests of the row prefetch (clusters taking rows in turn among them) and of clusters.
LOSSJIT_CACHE_DIR=/tmp/c227t timeout 200 exp70/exp/lossjit_tests -tc="row programs: the row prefetch*,row programs: fused value*" \
  > $OUT/tests.txt 2>&1; echo "exit $?" >> $OUT/tests.txt
grep -E "test cases|assertions|^exit|ERROR" $OUT/tests.txt | head -20
