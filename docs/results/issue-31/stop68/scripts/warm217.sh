#!/bin/bash
# Compiles round 217's kernels into exp68/c (--gpu h200) with the change's CLI (exp68/new).
source docs/results/issue-31/stop68/scripts/variants217.sh
c() { LOSSJIT_CACHE_DIR=$PWD/exp68/c exp68/new/lossjit compile "$@" --gpu h200 2>&1 | tail -1; }
for s in $SHAPES; do
  N=${s%x*}; C=${s#*x}
  for p in "${FAMILY[@]}"; do
    inputs="-i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64"
    [ "$p" = "class weights" ] && inputs="$inputs -i w=$C:uniform[0.5,2]"
    c examples/${FILES[$p]} $inputs --grad x
    c examples/${FILES[$p]} $inputs --grad x -k block=512
  done
  for m in "${MAPS[@]}"; do
    for b in $(warps_of $s) 512; do c "$m" -i x=$s:normal -k block=$b -k row_cache=on; done
  done
done
