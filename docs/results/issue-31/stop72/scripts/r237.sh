#!/bin/bash
# Round 237 (H200): the fused values and gradients GPU test with ca79cd8 (stop 71's r236), then the
# forwards of two and three inputs along the row with launch bounds asking registers for 4-6 blocks
# an SM (LJX_MIN_BLOCKS: an experiment build's environment knob), unroll 2 and 4.
set -u
R=$OUT/r237
mkdir -p $R
B=exp72/new
LOSSJIT_SOURCE_DIR=$PWD timeout 300 $B/lossjit_tests -tc="row programs: fused value and gradients match the reference" > $R/tests.txt 2>&1
echo "exit $?" >> $R/tests.txt
tail -3 $R/tests.txt
s=16384x16384
for mb in "" 4 5 6; do
  echo "== cosine $s mb=$mb" >> $R/sweeps.txt
  LJX_MIN_BLOCKS=$mb timeout 50 $B/lossjit bench examples/cosine.loss -i a=$s:normal -i b=$s:normal --sweep unroll=2,4 --sweep block=256 >> $R/sweeps.txt 2>&1
  echo "== triplet $s mb=$mb" >> $R/sweeps.txt
  LJX_MIN_BLOCKS=$mb timeout 50 $B/lossjit bench examples/triplet.loss -i a=$s:normal -i p=$s:normal -i n=$s:normal --sweep unroll=2,4 --sweep block=256 >> $R/sweeps.txt 2>&1
  echo "== mse rows $s mb=$mb" >> $R/sweeps.txt
  LJX_MIN_BLOCKS=$mb timeout 50 $B/lossjit bench "mean(sum((a - b)^2, -1))" -i a=$s:normal -i b=$s:normal --sweep unroll=2,4 --sweep block=256 >> $R/sweeps.txt 2>&1
done
echo "== cosine $s warps" >> $R/sweeps.txt
timeout 50 $B/lossjit bench examples/cosine.loss -i a=$s:normal -i b=$s:normal --sweep row_team=warp --sweep unroll=4,8 --sweep block=256,512 >> $R/sweeps.txt 2>&1
grep -h "^==\|^[0-9]" $R/sweeps.txt
