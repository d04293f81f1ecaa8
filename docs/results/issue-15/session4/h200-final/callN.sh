#!/usr/bin/env bash
# Session 2026-11-23d calls N (H200) / O (H100): the columns loop (kept row operands, registers for
# 1024 threads per SM, balanced chunks) and 512 threads for sums along rows: GPU tests, A/B, issue
# 15's alternating run. Usage: callN.sh TESTS_LIMIT_S TEST_FILTER
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p build/tests build/bench && cp .devbin/lossjit_tests build/tests/ && cp .devbin/lossjit_bench build/bench/ && cp .devbin/lossjit build/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; git log --oneline -1; } >> $OUT/steps.log 2>&1
t tests
timeout "$1" ./build/tests/lossjit_tests --test-suite=gpu -tc="$2" > $OUT/gpu.log 2>&1; echo "tests rc $?" >> $OUT/gpu.log
t ab
B="--examples examples --only value_and_grad --no-sweep --no-accuracy --reps 10"
echo "## before (old)" >> $OUT/ab.txt
LOSSJIT_CACHE_DIR=/tmp/c-old timeout 60 .devbin-scratch/old/lossjit_bench $B 2>&1 | grep -v '^ \|^{\|^}' >> $OUT/ab.txt
echo "## after" >> $OUT/ab.txt
LOSSJIT_CACHE_DIR=/tmp/c-new timeout 60 ./build/bench/lossjit_bench $B 2>&1 | grep -v '^ \|^{\|^}' >> $OUT/ab.txt
t alternating
timeout 380 bash bench/run_alternating.sh /tmp/alt 3 10 > /tmp/alt-run.log 2>&1; echo "rc $?" >> /tmp/alt-run.log
cp /tmp/alt/table.md $OUT/ 2>/dev/null; cp /tmp/alt-run.log $OUT/run.log
tar czf $OUT/alt.tgz -C /tmp alt
t end
