#!/bin/bash
# Round 217 (stop 68, H200): the rule of round 216 built (exp68/new: fewer warps keeping whole rows
# where 16 keep part) against main (exp68/main). (1) The cross-entropy family's value + gradient,
# bench/row_variants.py with the change's library, "default" against block=512 (main's kernel) in
# turn, twice, at 32768x4096, 24576x6144, 20480x5120. (2) The maps' forward (softmax, log_softmax,
# layer norm, RMS norm), `lossjit bench --sweep block=W,512 -k row_cache=on` (W: the change's warps).
# (3) lossjit_bench --rows, main and the change in turn, twice. Kernels compiled here (warm217.sh).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
cp -r exp68/c /tmp/c
export LOSSJIT_CACHE_DIR=/tmp/c LOSSJIT_LIBRARY=$PWD/exp68/new/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
source docs/results/issue-31/stop68/scripts/variants217.sh
only=(); for p in "${FAMILY[@]}"; do only+=(--only "$p"); done
for round in 1 2; do
  for s in $SHAPES; do
    echo "== round $round $s"
    timeout 100 python3 bench/row_variants.py --shape $s "${only[@]}" --variant default --variant block=512 --reps 10 2>&1
  done
done > $OUT/family.txt 2>&1
grep -E "==|of floor|rror" $OUT/family.txt
for s in 32768x4096 24576x6144; do
  for m in "${MAPS[@]}"; do
    echo "== $s $m"
    timeout 25 exp68/new/lossjit bench "$m" -i x=$s:normal --sweep block=$(warps_of $s),512 -k row_cache=on --reps 10 --sets 1 -q 2>&1
  done
done > $OUT/maps.txt 2>&1
grep -E "^==|^ *[12] " $OUT/maps.txt
for round in 1 2; do
  for v in main new; do
    echo "== round $round $v"
    timeout 100 exp68/$v/lossjit_bench --rows --reps 10 --examples examples --json $OUT/rows_${v}_$round.json 2>&1 | head -8
  done
done > $OUT/rows.txt 2>&1
cat $OUT/rows.txt
# (3b) Rows of 131072 in clusters of 4 (the default: each block keeps 82% of its share, two an SM)
# against 8 (whole shares), asked for, in turn (stop 53 measured 8 slower, before the later changes).
timeout 60 exp68/new/lossjit_bench --rows --only "cross_entropy 4096x131072" --variant row_cluster=4 \
  --variant row_cluster=8 --reps 10 --examples examples > $OUT/clusters.txt 2>&1
grep -v "^ *[{}\"]" $OUT/clusters.txt | head -20
# (4) Untimed, last: the GPU tests of row programs and the GPU random differential with the change,
# in parallel (this GPU's facts choose the new kernels where a warp's rows are 4096-6144 long).
i=0
for tc in "row programs: class-weight*,row programs: the gradient of an input of one*" "row programs: fused value*" \
          "row programs: reductions*,row programs: logsumexp and argmax*" "row programs: out-of-range*,row programs: rank 3*" \
          "row programs: the row prefetch*,row programs: gradients of maps*,row programs: a GPU known by name*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 150 exp68/new/lossjit_tests -tc="$tc" > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 150 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 217 --time-limit 125 --cli exp68/new/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|^exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
