#!/bin/bash
# Round 199 (stop 64, H200): value-only row programs that still walk each row twice after
# split_row_sums (the softmax's entropy, soft-target cross-entropy, distillation's KL forward): the
# defaults (row cache, prefetched) against the row cache off at 256/512/1024 threads x unroll 4/8.
# Carry exp64/split (this stop's lossjit).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
entropy="lp = x - logsumexp(x, -1); mean(-sum(exp(lp) * lp, -1))"
soft="mean(-sum(t * (x - logsumexp(x, -1)), -1))"
kl="q = t / 2 - logsumexp(t / 2, -1); p = x / 2 - logsumexp(x / 2, -1); batchmean(sum(exp(q) * (q - p), -1)) * 4"
for s in 16384x32768 8192x49152; do
  for name in entropy soft kl; do
    echo "== $name $s"
    targets="-i t=$s:uniform"; [ $name = entropy ] && targets=""
    timeout 75 exp64/split/lossjit bench "${!name}" -i x=$s:normal $targets \
      --sweep block=256,512,1024 --sweep unroll=4,8 --sweep row_cache=off -q 2>&1 | grep -E "^ *[0-9]+ |error"
  done
done > $OUT/two_walks.txt 2>&1
grep -E "^==|default| 1 " $OUT/two_walks.txt
