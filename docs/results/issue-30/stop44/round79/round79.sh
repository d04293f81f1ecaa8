#!/bin/bash
# Round 79: the review's mending (the scatter's launch planned in LaunchGrid::Scatter; one test helper).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
timeout 300 build/tests/lossjit_tests -ts=gpu -tc="*class-weight*,*one value per row ([N, 1])*,*fused value and gradients match*" > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
tail -4 $OUT/cpp.txt
(cd python && timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_gpu.py -k "weighted" 2>&1 | grep -v "^DEBUG" | tail -1) > $OUT/py.txt 2>&1
cat $OUT/py.txt
echo 'l = logsumexp(x, -1) - x[y]; sum(where(y != -1, w[y] * l, 0)) / sum(where(y != -1, w[y], 0))' > /tmp/cew.loss
timeout 120 compute-sanitizer --tool memcheck build/lossjit run /tmp/cew.loss -i x=3000x5000:normal -i "y=3000:integers[-1,4999]:i64" -i w=5000:uniform --grad w --grad x --check 2>&1 | grep -E "ERROR SUMMARY|check:" > $OUT/sanitizer.txt
cat $OUT/sanitizer.txt
