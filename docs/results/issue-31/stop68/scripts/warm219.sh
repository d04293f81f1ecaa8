#!/bin/bash
# Compiles round 219's kernels into exp68/c_h100 with exp68/main's CLI (--gpu h100).
source docs/results/issue-31/stop68/scripts/variants217.sh
c() { LOSSJIT_CACHE_DIR=$PWD/exp68/c_h100 exp68/main/lossjit compile "$@" --gpu h100 2>&1 | tail -1; }
for s in 32768x4096 24576x6144; do
  N=${s%x*}; C=${s#*x}
  for p in "${FAMILY[@]}"; do
    inputs="-i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64"
    [ "$p" = "class weights" ] && inputs="$inputs -i w=$C:uniform[0.5,2]"
    c examples/${FILES[$p]} $inputs --grad x
    c examples/${FILES[$p]} $inputs --grad x -k block=$(warps_of $s) -k row_cache=on
  done
  for m in "${MAPS[@]}"; do
    for b in $(warps_of $s) 512; do c "$m" -i x=$s:normal -k block=$b -k row_cache=on; done
  done
done
