#!/bin/bash
# Round 103: where the rows read twice could be read once: RMS norm over dimension 1 (rows side by
# side, no cache today) at block/unroll variants; softmax, log_softmax and instance norm rows of
# 393216 / 262144 in clusters of 8 with the row cache; L2 norm rows of 65535 in clusters of 2.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
B="timeout 150 build/lossjit bench -q --reps 10 --sets 1"
echo "== rms 16x64x512x512"; $B examples/kernelbench/36_RMSNorm_.loss -i x=16x64x512x512:normal --sweep block=128,256,512 --sweep unroll=4,8,16 2>&1 | tail -12
for P in 23_Softmax 24_LogSoftmax; do
  echo "== $P 512x393216"; $B examples/kernelbench/$P.loss -i x=512x393216:normal --sweep row_cluster=1,4,8 --sweep row_cache=off,on 2>&1 | tail -8
done
echo "== instance 4x64x512x512"; $B examples/kernelbench/34_InstanceNorm.loss -i x=4x64x512x512:normal --sweep row_cluster=1,4,8 --sweep row_cache=off,on 2>&1 | tail -8
echo "== l2 4096x65535"; $B examples/kernelbench/39_L2Norm_.loss -i x=4096x65535:normal --sweep row_cluster=1,2,4 --sweep row_cache=off,on 2>&1 | tail -8
