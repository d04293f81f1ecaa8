#!/bin/bash
# Round 223 (stop 69, H200): differential program 116 of seed 222 faults (misaligned address) with
# main's library as with the change's. Which launch, under compute-sanitizer where there is one.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD CUDA_LAUNCH_BLOCKING=1
ln -sf liblossjit_c.so.1.0 exp69/main/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/exp69/main/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/c116
for which in forward backward; do for k in cache auto; do
  echo "== $which $k"; timeout 60 python3 docs/results/issue-31/stop69/scripts/repro116.py $which $k 2>&1 | grep -v "^  File\|^    " | tail -4
done; done > $OUT/repro116.txt 2>&1
cat $OUT/repro116.txt
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  timeout 200 $CS --print-limit 4 python3 tests/differential/differential.py --seed 222 --only 116 --device cuda > $OUT/sanitizer.txt 2>&1
  grep -m 20 -E "Invalid|misaligned|at 0x|by thread|Address|lossjit_kernel|=====" $OUT/sanitizer.txt
else echo "no compute-sanitizer"; fi
