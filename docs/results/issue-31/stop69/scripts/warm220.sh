#!/bin/bash
# Compiles rounds 220-221's kernels into exp69/c (--gpu h200) with main's CLI (exp69/main) and the
# change's (exp69/p12w): the family's value + gradient at the three shapes.
source docs/results/issue-31/stop69/scripts/variants220.sh
for v in main p12w; do
  for s in $SHAPES; do
    N=${s%x*}; C=${s#*x}
    for p in "${FAMILY[@]}"; do
      inputs="-i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64"
      [ "$p" = "class weights" ] && inputs="$inputs -i w=$C:uniform[0.5,2]"
      LOSSJIT_CACHE_DIR=$PWD/exp69/c exp69/$v/lossjit compile examples/${FILES[$p]} $inputs --grad x --gpu h200 2>&1 | tail -1
    done
  done
done
