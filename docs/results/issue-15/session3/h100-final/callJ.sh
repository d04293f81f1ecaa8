#!/usr/bin/env bash
# Session 2026-11-23c call J (H100): division by a parameter through its reciprocal, KL at 512 threads: GPU tests, A/B, issue 15's alternating run.
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p build/tests build/bench && cp .devbin/lossjit_tests build/tests/ && cp .devbin/lossjit_bench build/bench/ && cp .devbin/lossjit build/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; git log --oneline -1; } >> $OUT/steps.log 2>&1
t tests
timeout 170 ./build/tests/lossjit_tests --test-suite=gpu -d -tc='parameters change*,every row of the language table*,value_and_grad: one kernel*,edge cases*,every input dtype*,log and xlogy*,row programs: fused*' > $OUT/gpu.log 2>&1; echo "tests rc $?" >> $OUT/gpu.log
t ab
KL="examples/kl.loss -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 10 --sets 1"
LOSSJIT_CACHE_DIR=/tmp/c-new timeout 60 ./build/lossjit bench $KL --sweep block=256,512 >> $OUT/kl.txt 2>&1
t alternating
timeout 330 bash bench/run_alternating.sh /tmp/alt 3 10 > /tmp/alt-run.log 2>&1; echo "rc $?" >> /tmp/alt-run.log
cp /tmp/alt/table.md $OUT/ 2>/dev/null; cp /tmp/alt-run.log $OUT/run.log
tar czf $OUT/alt.tgz -C /tmp alt
t end
