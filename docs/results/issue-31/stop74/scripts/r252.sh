#!/bin/bash
# Round 252 (H200): cosine's forward over 16384 x 16384 with a warp a row (no block barriers) against
# the default block a row (256 threads, registers for 4 blocks), main's build; two processes.
set -u
R=$OUT/r252
mkdir -p $R
V="--variant row_cache=auto --variant row_team=warp --variant row_team=warp,unroll=2 --variant row_team=warp,unroll=8
 --variant row_team=warp,block=256 --variant row_team=warp,block=1024 --variant block=512,unroll=2 --variant block=128,unroll=8"
for i in 1 2; do
  timeout 120 exp74/main/lossjit_bench --rows --reps 10 --examples examples --only "cosine 16384x16384" $V > $R/raw_$i.txt 2>&1
  grep "value+grad" $R/raw_$i.txt >> $R/summary.txt
done
cat $R/summary.txt
