#!/bin/bash
# Round 219 (prepared at stop 68, not run: no H100 was lent). On an H100, the kernels the H200 now
# takes (fewer warps keeping a warp's rows whole, ByRowWarpWholeRows) asked for by knob against the
# H100's default (16 warps keeping part of each row): if they win there too, the rule's row becomes
# the one for any GPU. Build main, copy build/lossjit, build/bench/lossjit_bench and
# build/src/capi/liblossjit_c.so.1 into exp68/main, fill exp68/c_h100 with warm219.sh, carry exp68.
# (1) bench/row_variants.py: default against block=W,row_cache=on (W: 384 at 4096 columns, 256 at
# 6144), the family, in turn, twice. (2) lossjit_bench --rows for cross-entropy 32768x4096 with both.
# (3) The maps' forwards: lossjit bench --sweep block=W,512 -k row_cache=on.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
cp -r exp68/c_h100 /tmp/c
export LOSSJIT_CACHE_DIR=/tmp/c LOSSJIT_LIBRARY=$PWD/exp68/main/liblossjit_c.so.1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt
source docs/results/issue-31/stop68/scripts/variants217.sh
only=(); for p in "${FAMILY[@]}"; do only+=(--only "$p"); done
for round in 1 2; do
  for s in 32768x4096 24576x6144; do
    echo "== round $round $s"
    timeout 100 python3 bench/row_variants.py --shape $s "${only[@]}" --variant default \
      --variant block=$(warps_of $s),row_cache=on --reps 10 2>&1
  done
done > $OUT/family.txt 2>&1
grep -E "==|of floor|rror" $OUT/family.txt
timeout 120 exp68/main/lossjit_bench --rows --only "cross_entropy 32768x4096" --variant row_cache=auto \
  --variant block=384,row_cache=on --reps 10 --examples examples > $OUT/rows.txt 2>&1
grep -v "^ *[{}\"]" $OUT/rows.txt | head -12
for s in 32768x4096 24576x6144; do
  for m in "${MAPS[@]}"; do
    echo "== $s $m"
    timeout 45 exp68/main/lossjit bench "$m" -i x=$s:normal --sweep block=$(warps_of $s),512 -k row_cache=on --reps 10 --sets 1 -q 2>&1
  done
done > $OUT/maps.txt 2>&1
grep -E "^==|^ *[123] " $OUT/maps.txt
