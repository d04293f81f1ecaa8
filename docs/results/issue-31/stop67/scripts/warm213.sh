#!/bin/bash
# Fills exp67/c_base and exp67/c_new with round 213's kernels (compiled here, --gpu h200): class
# weights' forward and value-and-gradient with each CLI, and r213.sh's sweeps with the change's.
source <(sed -n '/^sweeps() {/,/^}/p' docs/results/issue-31/stop67/scripts/r213.sh)
source <(sed -n '/^weights() {/,/^}/p' docs/results/issue-31/stop67/scripts/r213.sh)
weights | while IFS='|' read -r name inputs; do
  for v in base new; do
    bin=exp67/new/lossjit; [ $v = base ] && bin=exp66/cap/lossjit
    for g in "" "--grad x"; do
      LOSSJIT_CACHE_DIR=$PWD/exp67/c_$v $bin compile examples/cross_entropy_weighted.loss $inputs $g --gpu h200 > /dev/null 2>&1 \
        || echo "fail $v $name $g"
    done
  done
done
sweeps | while IFS='|' read -r name prog inputs; do
  for u in 1 2 4 8; do for b in 256 512; do
    LOSSJIT_CACHE_DIR=$PWD/exp67/c_new exp67/new/lossjit compile "$prog" $inputs -k unroll=$u -k block=$b --gpu h200 \
      > /dev/null 2>&1 || echo "fail $name $u $b"
  done; done
  LOSSJIT_CACHE_DIR=$PWD/exp67/c_new exp67/new/lossjit compile "$prog" $inputs --gpu h200 > /dev/null 2>&1 || echo "fail $name"
done
echo done
