#!/bin/bash
# Round 195 (stop 63, H200): value-only row programs that walk each row twice (label smoothing's
# forward; the softmax's entropy), the defaults against the row cache off (the second walk from L2)
# at 512 and 1024 threads, unroll 4 and 8 (round 194's sweep put 512 x 4 without the cache first at
# 16384 x 32768 and 16384 x 32000). Carry exp63/closed/lossjit.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
for s in 16384x32768 16384x32000 8192x49152 32768x4096; do
  N=${s%x*}; C=${s#*x}
  echo "== label smoothing $s"
  timeout 100 exp63/closed/lossjit bench examples/cross_entropy_smoothing.loss -i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64 \
    --sweep block=512,1024 --sweep unroll=4,8 --sweep row_cache=off -q 2>&1
  echo "== entropy of the softmax $s"
  timeout 100 exp63/closed/lossjit bench "lp = x - logsumexp(x, -1); mean(-sum(exp(lp) * lp, -1))" -i x=$s:normal \
    --sweep block=512,1024 --sweep unroll=4,8 --sweep row_cache=off -q 2>&1
done > $OUT/two_walks.txt 2>&1
grep -E "^==|^ *[0-9]+ " $OUT/two_walks.txt
