#!/bin/bash
# Round 162 (H200): HEAD's library against the final diet, one round each; then the rest of the GPU row tests.
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
O=$OUT/r162; mkdir -p $O
for r in 1 2; do
LOSSJIT_CACHE_DIR=/tmp/c_old timeout 100 build-old/bench/lossjit_bench --rows --reps 10 --examples examples --no-accuracy > $O/old$r.txt 2>&1
LOSSJIT_CACHE_DIR=/tmp/c_new timeout 100 build/bench/lossjit_bench --rows --reps 10 --no-accuracy > $O/new$r.txt 2>&1
done
LOSSJIT_CACHE_DIR=/tmp/ljcache timeout 400 build/tests/lossjit_tests --duration=true -tc="row programs: takes of K*,row programs: rows side by side*,row programs: gradients of maps*,every row of the language table*,row programs: the gradient of amax*,row programs: a mean*,row programs: group norm*,row programs along*,value_and_grad*" > $O/gpu_tests_b.txt 2>&1; echo "exit $?" >> $O/gpu_tests_b.txt
grep -n "^[0-9.]* s: \|ERROR\|test cases\|assertions\|exit" $O/gpu_tests_b.txt | tail -16
for f in old1 new1 old2 new2; do echo "== $f"; sed -n 3,7p $O/$f.txt; done
