#!/bin/bash
# Round 109 timing: main's library (four walks) and the new one, alternating by process.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
R=docs/results/issue-29/stop49/round109
for L in new main new main; do
  if [ $L = main ]; then LIB=$PWD/build/main-bin/liblossjit_c.so.1.0; else LIB=$PWD/build/src/capi/liblossjit_c.so.1.0; fi
  LOSSJIT_LIBRARY=$LIB timeout 140 python3 -u $R/ln_time.py $L 2>&1 | grep -v Warning | tail -3
  echo "$L few_rows"; LOSSJIT_LIBRARY=$LIB timeout 100 python3 -u bench/few_rows.py --reps 10 --only layer_norm 2>&1 | grep -v Warning | tail -3
done
