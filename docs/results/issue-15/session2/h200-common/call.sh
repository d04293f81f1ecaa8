#!/usr/bin/env bash
# Session 2026-11-23b call C (H200): KL's common path (rare log inputs flagged, the vector recomputed) against the code before, SASS, GPU tests, issue 15's alternating run.
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p build/tests build/bench build/src/capi && cp .devbin/lossjit_tests .devbin/test_capi build/tests/ && cp .devbin/lossjit_bench .devbin/lossjit_cold_start build/bench/ && cp .devbin/lossjit build/ && cp -a .devbin/liblossjit_c.so* build/src/capi/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; git log --oneline -1; } >> $OUT/steps.log 2>&1
t sass
mkdir -p /tmp/sass && for c in .devbin-scratch/*.cubin; do cuobjdump -sass $c > /tmp/sass/$(basename $c .cubin).sass 2>&1; done
tar czf $OUT/sass.tgz -C /tmp sass
t tests
timeout 90 ./build/tests/lossjit_tests --test-suite=gpu -d -tc='log and xlogy*,every row of the language table*,every input dtype*,maps write every*,edge cases*' > $OUT/gpu.log 2>&1; echo "tests rc $?" >> $OUT/gpu.log
t kl-ab
KL="examples/kl.loss -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 10 --sets 1"
for r in 1 2; do
  echo "## before (main), run $r" >> $OUT/kl-ab.txt
  LOSSJIT_CACHE_DIR=/tmp/c-old timeout 40 .devbin-scratch/old/lossjit bench $KL --sweep unroll=1,2,4 >> $OUT/kl-ab.txt 2>&1
  echo "## common path, run $r" >> $OUT/kl-ab.txt
  LOSSJIT_CACHE_DIR=/tmp/c-new timeout 40 ./build/lossjit bench $KL --sweep unroll=1,2,4 >> $OUT/kl-ab.txt 2>&1
done
echo "## fast math (the ceiling), common path build" >> $OUT/kl-ab.txt
LOSSJIT_CACHE_DIR=/tmp/c-new timeout 30 ./build/lossjit bench $KL -k fast_math=on >> $OUT/kl-ab.txt 2>&1
t alternating
timeout 300 bash bench/run_alternating.sh /tmp/alt 3 10 > /tmp/alt-run.log 2>&1; echo "rc $?" >> /tmp/alt-run.log
cp /tmp/alt/table.md $OUT/ 2>/dev/null; cp /tmp/alt-run.log $OUT/run.log
tar czf $OUT/alt.tgz -C /tmp alt
t end
