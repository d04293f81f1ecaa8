#!/bin/bash
# Prepared for the next H200 session (not run in stop 72): first the GPU tests that stop 72 could not
# run (the registers knob at its extremes; the several-input row reductions again), then every row
# problem of lossjit_bench --rows with the register bound varied (`registers`: the defaults, 255 = no
# bound, 64, 48) for the value and the value + gradient (lossjit_bench times the variants twice over, in
# turn). Build first (cmake --build build), copy
# build/tests/lossjit_tests and build/bench/lossjit_bench into exp72/new/, carry exp72. Run from the
# repository root.
set -u
R=$OUT/r241
mkdir -p $R
LOSSJIT_SOURCE_DIR=$PWD timeout 120 exp72/new/lossjit_tests -tc="knobs at their extremes*,row programs: reductions of several inputs*" > $R/tests.txt 2>&1
echo "exit $?" >> $R/tests.txt
tail -3 $R/tests.txt
timeout 400 exp72/new/lossjit_bench --rows --reps 10 --examples examples --variant registers=auto --variant registers=255 \
  --variant registers=64 --variant registers=48 > $R/rows.txt 2>&1
echo "exit $?"; grep "of read" $R/rows.txt
