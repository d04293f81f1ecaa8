#!/bin/bash
# Fills exp67/c_base and exp67/c_final with round 214's timed kernels (compiled here, --gpu h200).
in="-i x=65536x2048:normal -i y=65536:integers[0,2047]:i64 -i w=2048:uniform[0.5,2]"
for v in base final; do
  for g in "" "--grad x"; do
    LOSSJIT_CACHE_DIR=$PWD/exp67/c_$v exp67/$v/lossjit compile examples/cross_entropy_weighted.loss $in $g --gpu h200 > /dev/null || echo "fail $v $g"
  done
done
t="-i a=16384x16384:normal -i p=16384x16384:normal -i n=16384x16384:normal"
for u in 2 4; do for b in 256 512; do
  LOSSJIT_CACHE_DIR=$PWD/exp67/c_final exp67/final/lossjit compile examples/triplet.loss $t -k unroll=$u -k block=$b --gpu h200 > /dev/null || echo "fail triplet $u $b"
done; done
LOSSJIT_CACHE_DIR=$PWD/exp67/c_final exp67/final/lossjit compile examples/triplet.loss $t --gpu h200 > /dev/null
echo done
