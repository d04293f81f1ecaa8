#!/usr/bin/env bash
# Session 2026-11-23c call H: the rows loop with prefetch (pf/) against without (.devbin), same code otherwise.
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p build/bench && cp .devbin/lossjit_bench build/bench/ && cp .devbin/lossjit build/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; git log --oneline -1; } >> $OUT/steps.log 2>&1
t kl
KL="examples/kl.loss -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 10 --sets 1"
for r in 1 2; do
  echo "## no prefetch, run $r" >> $OUT/kl.txt
  LOSSJIT_CACHE_DIR=/tmp/c-old timeout 60 ./build/lossjit bench $KL --sweep unroll=2,4 --sweep block=256,512 >> $OUT/kl.txt 2>&1
  echo "## prefetch, run $r" >> $OUT/kl.txt
  LOSSJIT_CACHE_DIR=/tmp/c-pf timeout 60 .devbin-scratch/pf/lossjit bench $KL --sweep unroll=1,2,4 --sweep block=256,512 >> $OUT/kl.txt 2>&1
done
t five
for r in 1 2; do
  for v in old pf; do
    b=./build/bench/lossjit_bench; [ $v = pf ] && b=.devbin-scratch/pf/lossjit_bench
    LOSSJIT_CACHE_DIR=/tmp/c-$v timeout 100 $b --examples examples --only hinge mse kl smooth_l1 hardsigmoid value_and_grad --no-sweep --no-accuracy --reps 10 --json /tmp/$v-$r.json >> $OUT/five-$v.txt 2>&1
  done
done
t vg-explore
LOSSJIT_CACHE_DIR=/tmp/c-pf timeout 150 .devbin-scratch/pf/lossjit_bench --examples examples --only value_and_grad --no-sweep --no-accuracy --reps 10 --explore --json /tmp/pf-explore.json >> $OUT/explore.txt 2>&1
mkdir -p /tmp/res && cp /tmp/*.json /tmp/res/ 2>/dev/null; tar czf $OUT/json.tgz -C /tmp res
t end
