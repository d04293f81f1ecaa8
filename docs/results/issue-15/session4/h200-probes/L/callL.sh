#!/usr/bin/env bash
# Session 2026-11-23d call L (H200): a block per row for sums along many rows, columns loop with
# kept row operands, 64-register cap, balanced chunks: GPU tests of gradients, A/B, columns waves, explore.
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p build/tests build/bench && cp .devbin/lossjit_tests build/tests/ && cp .devbin/lossjit_bench build/bench/ && cp .devbin/lossjit build/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; git log --oneline -1; } >> $OUT/steps.log 2>&1
t tests
timeout 150 ./build/tests/lossjit_tests --test-suite=gpu -tc='value_and_grad: one kernel*,gradients of broadcast inputs*,gradients: one Loss*,gradients of one value per row*,every row of the language table*,layouts*' > $OUT/gpu.log 2>&1; echo "tests rc $?" >> $OUT/gpu.log
t ab
B="--examples examples --only value_and_grad --no-sweep --no-accuracy --reps 10"
for r in 1 2; do
  echo "## before (old), run $r" >> $OUT/ab.txt
  LOSSJIT_CACHE_DIR=/tmp/c-old timeout 60 .devbin-scratch/old/lossjit_bench $B 2>&1 | grep -v '^ \|^{\|^}' >> $OUT/ab.txt
  echo "## after, run $r" >> $OUT/ab.txt
  LOSSJIT_CACHE_DIR=/tmp/c-new timeout 60 ./build/bench/lossjit_bench $B 2>&1 | grep -v '^ \|^{\|^}' >> $OUT/ab.txt
done
t waves
for w in 1 2 4 8 16; do
  echo "## columns waves $w" >> $OUT/waves.txt
  LJX_WAVES=$w LOSSJIT_CACHE_DIR=/tmp/c-exp$w timeout 60 .devbin-scratch/exp/lossjit_bench $B 2>&1 | grep "hinge value_and_grad (p, t)" >> $OUT/waves.txt
done
t explore
LOSSJIT_CACHE_DIR=/tmp/c-new timeout 150 ./build/bench/lossjit_bench $B --explore --json /tmp/explore.json > /tmp/explore.log 2>&1; echo "rc $?" >> /tmp/explore.log
tar czf $OUT/extra.tgz -C /tmp explore.json explore.log
t end
