#!/bin/bash
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
timeout 60 python3 build/gpu/dbg43.py cuda > $OUT/dbg43.txt 2>&1; grep -A3 "value\|gpu grad" $OUT/dbg43.txt | head -40
for C in 65535 65536; do
  echo "== L1 2048x$C"; timeout 100 build/lossjit bench examples/kernelbench/38_L1Norm_.loss -q -i x=2048x$C:normal --reps 10 --sets 1 --sweep unroll=1,4,8,16 --sweep block=512,1024 2>&1 | tail -10
done | tee $OUT/misaligned.txt
( timeout 280 python3 -u tests/differential/differential.py --device cuda --count 300 --seed 93 --time-limit 200 --log $OUT/diff.txt > $OUT/diff_out.txt 2>&1; echo "rc $?" >> $OUT/diff_out.txt )
tail -12 $OUT/diff_out.txt
