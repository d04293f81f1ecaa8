#!/bin/bash
# Compiles round 215's kernels into exp68/c with exp68/main's CLI (--gpu h200).
source docs/results/issue-31/stop68/scripts/variants215.sh
for s in 32768x4096 16384x8192; do
  N=${s%x*}; C=${s#*x}
  for p in "${FAMILY[@]}"; do
    inputs="-i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64"
    [ "$p" = "class weights" ] && inputs="$inputs -i w=$C:uniform[0.5,2]"
    for v in $(variants $s); do
      ks=(); [ $v != default ] && for k in ${v//,/ }; do ks+=(-k $k); done
      LOSSJIT_CACHE_DIR=$PWD/exp68/c exp68/main/lossjit compile examples/${FILES[$p]} $inputs --grad x --gpu h200 "${ks[@]}" \
        2>&1 | tail -1 | sed "s/^/$p $s $v: /"
    done
  done
done
