#!/bin/bash
# Round 78: compute-sanitizer memcheck and racecheck of the scatter kernels (the final code).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
echo 'l = logsumexp(x, -1) - x[y]; sum(where(y != -1, w[y] * l, 0)) / sum(where(y != -1, w[y], 0))' > /tmp/cew.loss
echo 'mean(w[y] * (logsumexp(x, 1) - x[y]))' > /tmp/kdim.loss
{
for tool in memcheck racecheck initcheck; do
  echo "== $tool 3000x5000"
  timeout 120 compute-sanitizer --tool $tool build/lossjit run /tmp/cew.loss -i x=3000x5000:normal -i "y=3000:integers[-1,4999]:i64" -i w=5000:uniform --grad w --grad x 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|error" | head -5
  echo "== $tool 64x40000 bf16"
  timeout 120 compute-sanitizer --tool $tool build/lossjit run /tmp/cew.loss -i x=64x40000:normal:bf16 -i "y=64:integers[-1,39999]:i64" -i w=40000:uniform:bf16 --grad w 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|error" | head -5
  echo "== $tool kdim 8x100x300"
  timeout 120 compute-sanitizer --tool $tool build/lossjit run /tmp/kdim.loss -i x=8x100x300:normal -i "y=8x300:integers[0,99]:i64" -i w=100x1:uniform --grad w --check 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|error|check:" | head -5
done
} > $OUT/sanitizer.txt 2>&1
cat $OUT/sanitizer.txt
