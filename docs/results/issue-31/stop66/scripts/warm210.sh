#!/bin/bash
# Fills exp66/c_{base,new,cap} with round 210's kernels, each CLI's own (compiled here, --gpu h200).
source <(sed -n '/^cases() {/,/^}/p' docs/results/issue-31/stop66/scripts/r210.sh)
cases | while IFS='|' read -r name prog inputs; do
  for v in base new cap; do
    LOSSJIT_CACHE_DIR=$PWD/exp66/c_$v exp66/$v/lossjit compile "$prog" $inputs --gpu h200 > /dev/null 2>&1 || echo "fail $v $name"
  done
done
echo done
