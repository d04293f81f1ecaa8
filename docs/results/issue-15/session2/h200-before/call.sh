#!/usr/bin/env bash
# Session 2026-11-23b call B (H200): SASS of KL variants; issue 15's alternating run on main (new rows loop).
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p build/tests build/bench build/src/capi && cp .devbin/lossjit_tests .devbin/test_capi build/tests/ && cp .devbin/lossjit_bench .devbin/lossjit_cold_start build/bench/ && cp .devbin/lossjit build/ && cp -a .devbin/liblossjit_c.so* build/src/capi/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; git log --oneline -1; } >> $OUT/steps.log 2>&1
t sass
mkdir -p /tmp/sass && for c in .devbin-scratch/*.cubin; do cuobjdump -sass $c > /tmp/sass/$(basename $c .cubin).sass 2>&1; done
tar czf $OUT/sass.tgz -C /tmp sass
t alternating
timeout 330 bash bench/run_alternating.sh /tmp/alt 3 10 > /tmp/alt-run.log 2>&1; echo "rc $?" >> /tmp/alt-run.log
cp /tmp/alt/table.md $OUT/ 2>/dev/null; cp /tmp/alt-run.log $OUT/run.log
tar czf $OUT/alt.tgz -C /tmp alt
t end
