#!/bin/bash
# Round 251 (H200): main's GPU random differential (build of 40e35ad, the code of main) under seeds
# not run before, six processes at once, each with its own seed and a 400 s limit.
set -u
R=$OUT/r251
mkdir -p $R
export LOSSJIT_LIBRARY=$PWD/exp74/main/liblossjit_c.so.1
for s in 2510 2511 2512 2513 2514 2515; do
  (timeout 470 python3 -u tests/differential/differential.py --device cuda --count 5000 --seed $s --time-limit 400 \
     --cli exp74/main/lossjit > $R/seed_$s.txt 2>&1; echo "exit $?" >> $R/seed_$s.txt) &
done
wait
for s in 2510 2511 2512 2513 2514 2515; do echo "== seed $s"; tail -n 6 $R/seed_$s.txt; done > $R/summary.txt
cat $R/summary.txt
