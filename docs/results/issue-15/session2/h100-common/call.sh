#!/usr/bin/env bash
# Session 2026-11-23b call D (H100): GPU tests left from call A and of the common path, bf16 cold start, KL before/after, issue 15's alternating run.
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p build/tests build/bench build/src/capi && cp .devbin/lossjit_tests .devbin/test_capi build/tests/ && cp .devbin/lossjit_bench .devbin/lossjit_cold_start build/bench/ && cp .devbin/lossjit build/ && cp -a .devbin/liblossjit_c.so* build/src/capi/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; git log --oneline -1; } >> $OUT/steps.log 2>&1
mkdir -p /tmp/alt
t tests
timeout 150 ./build/tests/lossjit_tests --test-suite=gpu -d -tc='log and xlogy*,a sweep*,tune stores*,row programs*,layouts*,sizes around*,fused gradients into*,every input dtype*,gradients of one value per row*' > $OUT/gpu.log 2>&1; echo "tests rc $?" >> $OUT/gpu.log
t cold
timeout 60 python3 bench/cold_start.py --binary build/bench/lossjit_cold_start --rounds 7 --dtype bfloat16 --json /tmp/alt/cold-start-bf16.json > $OUT/cold.log 2>&1; echo "rc $?" >> $OUT/cold.log
t kl-ab
KL="examples/kl.loss -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 10 --sets 1"
for r in 1 2; do
  echo "## before (main), run $r" >> $OUT/kl-ab.txt
  LOSSJIT_CACHE_DIR=/tmp/c-old timeout 40 .devbin-scratch/old/lossjit bench $KL --sweep unroll=2,4 >> $OUT/kl-ab.txt 2>&1
  echo "## common path, run $r" >> $OUT/kl-ab.txt
  LOSSJIT_CACHE_DIR=/tmp/c-new timeout 40 ./build/lossjit bench $KL --sweep unroll=2,4 >> $OUT/kl-ab.txt 2>&1
done
t alternating
timeout 300 bash bench/run_alternating.sh /tmp/alt 3 10 > /tmp/alt-run.log 2>&1; echo "rc $?" >> /tmp/alt-run.log
cp /tmp/alt/table.md $OUT/ 2>/dev/null; cp /tmp/alt-run.log $OUT/run.log
tar czf $OUT/alt.tgz -C /tmp alt
t end
