#!/bin/bash
# Round 218 (stop 68, H200): round 217's map forwards that ran past its 25 s limit (all but RMS norm
# over 32768x4096): `lossjit bench --sweep block=W,512 -k row_cache=on` with the change's CLI, W its
# warps (384 at 4096 columns, 256 at 6144), 512 main's. Carry exp68.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
cp -r exp68/c /tmp/c
export LOSSJIT_CACHE_DIR=/tmp/c
source docs/results/issue-31/stop68/scripts/variants217.sh
for s in 32768x4096 24576x6144; do
  for m in "${MAPS[@]}"; do
    [ "$s" = 32768x4096 ] && [ "$m" = "${MAPS[3]}" ] && continue
    echo "== $s $m"
    timeout 45 exp68/new/lossjit bench "$m" -i x=$s:normal --sweep block=$(warps_of $s),512 -k row_cache=on --reps 10 --sets 1 -q 2>&1
  done
done > $OUT/maps.txt 2>&1
grep -E "^==|^ *[123] " $OUT/maps.txt
