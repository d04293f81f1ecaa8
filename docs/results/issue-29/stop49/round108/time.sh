#!/bin/bash
# Round 108 timing: main's library and the branch's, alternating by process.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
R=docs/results/issue-29/stop49/round108
for L in branch main branch main; do
  if [ $L = main ]; then LIB=$PWD/build/main-bin/liblossjit_c.so.1.0; else LIB=$PWD/build/src/capi/liblossjit_c.so.1.0; fi
  LOSSJIT_LIBRARY=$LIB timeout 140 python3 -u $R/rf_time.py $L 2>&1 | grep -v Warning | tail -3
done
