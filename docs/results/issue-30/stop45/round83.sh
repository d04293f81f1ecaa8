#!/bin/bash
# Round 83: the Python GPU suite, the GPU differential, and compute-sanitizer on x[k]'s kernels
# (a block team, a cluster of 4 with racecheck's shared-memory check).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
(cd python && timeout 200 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_gpu.py 2>&1 | grep -v "^DEBUG" | tail -15) > $OUT/py.txt 2>&1
cat $OUT/py.txt
timeout 200 python3 tests/differential/differential.py --device cuda --count 200 --seed 182 --cli build/lossjit > $OUT/differential.txt 2>&1; echo "differential rc $?" >> $OUT/differential.txt
tail -6 $OUT/differential.txt
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool build/lossjit run examples/distill_topk.loss -i x=300x5000:normal -i "k=300x40:integers[0,4999]:i64" -i "q=300x40:uniform[0.05,0.2]" --grad x --grad q --check 2>&1 | grep -E "ERROR SUMMARY|check:|error" | head -5
  timeout 60 compute-sanitizer --tool $tool build/lossjit run examples/distill_topk.loss -i x=3x200000:normal -i "k=3x40:integers[0,199999]:i64" -i "q=3x40:uniform[0.05,0.2]" --grad x --grad q --check --knob row_cluster=4 2>&1 | grep -E "ERROR SUMMARY|check:|error" | head -5
done > $OUT/sanitizer.txt
cat $OUT/sanitizer.txt
