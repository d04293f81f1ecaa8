#!/bin/bash
# Round 233 (H200): the GPU test of fused row values and gradients with main's head (ab52077: stop 70's
# part-kept prefetch included), which round 229 left out. Run from the repository root.
set -u
R=$OUT/r233
mkdir -p $R
LOSSJIT_SOURCE_DIR=$PWD timeout 480 exp71/bin/lossjit_tests -tc="row programs: fused value and gradients match the reference" > $R/tests.txt 2>&1
echo "exit $?" >> $R/tests.txt
