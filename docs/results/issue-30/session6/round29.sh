#!/usr/bin/env bash
# Round 29 (2026-11-26, H100): add_group in every row kernel: other row programs, a54cf76 (A) against
# main (B) alternating, default variants: cosine, triplet, softmax and RMS norm maps, cross-entropy in
# bfloat16, logsumexp along dimension 0 (strided rows, vector 1).
set -u
export LOSSJIT_CACHE_DIR=/tmp/ljcache
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
md5sum build/gpu/lossjit_A build/lossjit | tee $OUT/builds.txt
run() {  # name, program, inputs...
  local name=$1 prog=$2; shift 2
  for b in build/gpu/lossjit_A build/lossjit; do
    r=$(timeout 60 $b bench "$prog" "$@" --reps 15 --sets 1 --json -q 2>>$OUT/err.txt | python3 -c "
import json,sys; d=json.load(sys.stdin)
print(' | '.join(f\"b{v['block_threads']} u{v['unroll']} {v['ms']:.4f} r{v['registers']} {v['roofline_fraction']:.3f}\" for v in d['rows'][:1]))" 2>>$OUT/err.txt)
    echo "round $round $(basename $b) $name $r" | tee -a $OUT/ab.txt
  done
}
for round in 1 2; do
  run cosine examples/cosine.loss -i a=16384x4096:normal -i b=16384x4096:normal
  run triplet examples/triplet.loss -i a=16384x4096:normal -i p=16384x4096:normal -i n=16384x4096:normal
  run softmax 'exp(x - logsumexp(x, -1))' -i x=16384x4096:normal
  run rmsnorm 'x / sqrt(mean(x^2, -1) + 1e-5)' -i x=16384x4096:normal
  run ce_bf16 examples/cross_entropy.loss -i x=16384x32768:normal:bf16 -i y=16384:integers[0,32767]:i64
  run lse_dim0 'logsumexp(x, 0)' -i x=4096x16384:normal
done
