#!/bin/bash
# Round 112 (H100): block teams merging the warps' parts by a butterfly (log2 W merges a thread, not
# W - 1), and an experiment's switch (LJ_EXP_BLOCK_TEAM=1, not on main) that makes a block size set by
# hand take a block a row. Carry build/{src/capi/liblossjit_c.so.1.0,lossjit,tests/lossjit_tests,
# main-bin,new-bin}: main-bin is main's library before the butterfly, new-bin the experiment's build.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
R=docs/results/issue-29/stop50/round112
mkdir -p /tmp/r; nvidia-smi --query-gpu=name --format=csv,noheader
i=0
for T in '*squared deviations*' '*group norm*' '*fused value and gradients*' '*gradients of maps that reduce*' '*reductions match the reference in every team*' '*statistics: values*'; do
  i=$((i+1)); (timeout 200 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > /tmp/r/case$i.txt 2>&1; echo "rc $? $T" >> /tmp/r/case$i.txt) &
done
(export LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0; timeout 200 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 112 --time-limit 150 --log /tmp/r/diff.txt > /tmp/r/diff_out.txt 2>&1) &
wait
for f in /tmp/r/case*.txt; do grep -E "ERROR|rc |test cases|assertions" $f | head -6; done
head -2 /tmp/r/diff_out.txt; grep -A3 "fails" /tmp/r/diff_out.txt | head -8; tail -1 /tmp/r/diff_out.txt
LN='m = mean(x, -1); (x - m) / sqrt(mean((x - m)^2, -1) + 1e-5)'
for S in 16384x8192 32768x4096; do
  echo "main $S"; build/main-bin/lossjit bench "$LN" -q -i x=$S:normal --reps 10 --sets 1 -k row_cache=on 2>&1 | tail -2
  echo "new $S"; build/new-bin/lossjit bench "$LN" -q -i x=$S:normal --reps 10 --sets 1 -k row_cache=on 2>&1 | tail -2
  echo "new block team $S"; LJ_EXP_BLOCK_TEAM=1 build/new-bin/lossjit bench "$LN" -q -i x=$S:normal --reps 10 --sets 1 --sweep block=128,256,512 -k row_cache=on 2>&1 | tail -3
done
for k in 1 2; do
  X=""; [ $k = 1 ] && X=--reference
  LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0 timeout 100 python3 -u $R/rows.py new default block=256,row_cache=on $X 2>&1 | grep "^("
  LOSSJIT_LIBRARY=$PWD/build/main-bin/liblossjit_c.so.1.0 timeout 60 python3 -u $R/rows.py main default 2>&1 | grep "^("
  LJ_EXP_BLOCK_TEAM=1 LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0 timeout 100 python3 -u $R/rows.py team block=128,row_cache=on block=256,row_cache=on 2>&1 | grep "^("
done
