#!/bin/bash
# Round 160 (H100): HEAD's library against the instruction diet, alternating; the GPU random-program
# differential on the diet.
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
O=$OUT/r160; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt
for r in 1 2; do
  LOSSJIT_CACHE_DIR=/tmp/c_old timeout 150 build-old/bench/lossjit_bench --rows --reps 10 --examples examples --no-accuracy > $O/old$r.txt 2>&1
  LOSSJIT_CACHE_DIR=/tmp/c_new timeout 150 build/bench/lossjit_bench --rows --reps 10 --no-accuracy > $O/new$r.txt 2>&1
done
LOSSJIT_CACHE_DIR=/tmp/c_new timeout 280 python3 tests/differential/differential.py --device cuda --count 600 --seed 5601 --time-limit 230 --cli build/lossjit > $O/differential.txt 2>&1; echo "exit $?" >> $O/differential.txt
tail -3 $O/differential.txt
for f in old1 new1 old2 new2; do sed -n 3,7p $O/$f.txt; echo; done
