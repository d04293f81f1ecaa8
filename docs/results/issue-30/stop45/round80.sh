#!/bin/bash
# Round 80: takes of K indices per row on the GPU (the K walk, the scatter written again, q's gradient).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
timeout 240 build/tests/lossjit_tests -ts=gpu -tc="*takes of K indices*" > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
grep -E "ERROR|test cases|assertions|rc" $OUT/cpp.txt | head -30
(cd python && timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_gpu.py -k "top_k" 2>&1 | grep -v "^DEBUG" | tail -15) > $OUT/py.txt 2>&1
cat $OUT/py.txt
timeout 150 python3 bench/distill_topk.py --shape 16384x32768 --k 64 --reps 10 --json $OUT/bench_f32.json > $OUT/bench.txt 2>&1; echo "bench rc $?" >> $OUT/bench.txt
tail -30 $OUT/bench.txt
timeout 60 compute-sanitizer --tool memcheck build/lossjit run examples/distill_topk.loss -i x=300x5000:normal -i "k=300x40:integers[-1,5000]:i64" -i "q=300x40:uniform[0.05,0.2]" --grad x --grad q --check 2>&1 | grep -E "ERROR SUMMARY|check:|error" | head > $OUT/sanitizer.txt
cat $OUT/sanitizer.txt
