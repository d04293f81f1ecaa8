#!/bin/bash
# Round 106: the side-by-side cache with registers for at least 64 a thread: its GPU case (the
# knob's report fixed), K-dimensional cross-entropy over 21 and 100 classes against torch.compile,
# log_softmax over 21 classes, and the K-dimensional cross-entropy's forward at block / unroll.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for T in '*rows side by side kept in the row cache*'; do
  timeout 200 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > $OUT/case.txt 2>&1; echo "rc $?" >> $OUT/case.txt; cat $OUT/case.txt >> $OUT/cases.txt; echo "$T"; grep -E "ERROR|rc |test cases|assertions| s: " $OUT/case.txt | head -6
done
timeout 120 python3 -u docs/results/issue-29/stop48/round105/side_cache.py ce,ce100 2>&1 | grep -v Warning | tail -4
B="timeout 60 build/lossjit bench -q --reps 10 --sets 1"
echo "== log_softmax dim 1 16x21x512x512"; $B 'x - logsumexp(x, 1)' -i x=16x21x512x512:normal --sweep row_cache=auto,off 2>&1 | tail -3
echo "== ce forward 16x21x512x512"; $B 'mean(logsumexp(x, 1) - x[y])' -i x=16x21x512x512:normal -i 'y=16x512x512:integers[0,20]:i64' --sweep block=128,512 --sweep unroll=2,4,16 2>&1 | tail -7
