#!/bin/bash
# Round 109: short_rows.py with the rule (new) and without it (split: the same tree with
# ByRowCachedShortRowMinRegisters out of reach), alternating by process, one H100.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
R=docs/results/issue-29/stop49/round109
nvidia-smi --query-gpu=name --format=csv,noheader
for L in new split new split; do
  X=""; [ $L = new ] && [ -z "$DONE" ] && X=--reference && DONE=1
  LOSSJIT_LIBRARY=$PWD/build/$L-bin/liblossjit_c.so.1.0 timeout 170 python3 -u $R/short_rows.py $L $X 2>&1 | grep -v -i warn | tail -12
done
