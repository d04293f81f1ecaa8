#!/bin/bash
# Round 238 (H200): the register bound for a block's row of several inputs reduced alone
# (ByRowBlockSeveralInputsMaxRegisters). exp72/main: main 52491c1 (an experiment build whose extra
# environment knob is unset); exp72/new: the change. GPU tests of the change first, then the forwards,
# main and the change in turn: lossjit_bench --rows (cosine 16384 x 16384) twice each, then `lossjit
# bench` of the defaults over other shapes and types, then the GPU random differential.
set -u
R=$OUT/r238
mkdir -p $R
LOSSJIT_SOURCE_DIR=$PWD timeout 200 exp72/new/lossjit_tests -tc="row programs: reductions of several inputs*,row programs: a GPU known by name*,row programs: reductions match*,row programs: rank 3*" > $R/tests.txt 2>&1
echo "exit $?" >> $R/tests.txt
tail -3 $R/tests.txt
for pass in 1 2; do
  for b in main new; do
    timeout 40 exp72/$b/lossjit_bench --rows --reps 10 --examples examples --only "cosine 16384x16384" > $R/rows_${b}_$pass.txt 2>&1
    echo "== $b pass $pass exit $?"; grep "cosine" $R/rows_${b}_$pass.txt
  done
done
one() {  # name, then the bench arguments
  local name=$1; shift
  for b in main new; do
    echo "== $name $b" >> $R/defaults.txt
    timeout 40 exp72/$b/lossjit bench "$@" >> $R/defaults.txt 2>&1
  done
}
one "triplet 16384x16384" examples/triplet.loss -i a=16384x16384:normal -i p=16384x16384:normal -i n=16384x16384:normal
one "triplet 8192x32768" examples/triplet.loss -i a=8192x32768:normal -i p=8192x32768:normal -i n=8192x32768:normal
one "cosine 8192x32768" examples/cosine.loss -i a=8192x32768:normal -i b=8192x32768:normal
one "cosine 4096x65536" examples/cosine.loss -i a=4096x65536:normal -i b=4096x65536:normal
one "cosine bf16 16384x16384" examples/cosine.loss -i a=16384x16384:normal:bf16 -i b=16384x16384:normal:bf16
one "mse rows 16384x16384" "mean(sum((a - b)^2, -1))" -i a=16384x16384:normal -i b=16384x16384:normal
grep "^==\|default" $R/defaults.txt
LOSSJIT_LIBRARY=$PWD/exp72/new/liblossjit_c.so.1 timeout 90 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 238 --time-limit 60 --cli exp72/new/lossjit > $R/differential.txt 2>&1
echo "differential exit $?" >> $R/differential.txt
tail -4 $R/differential.txt
