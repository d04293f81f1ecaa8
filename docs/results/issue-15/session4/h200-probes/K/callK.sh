#!/usr/bin/env bash
# Session 2026-11-23d call K (H200): columns loop with kept row operands, 64-register cap and a
# balanced chunk count: GPU tests of gradients, A/B of the fused kernels, explore, squared-hinge shapes, ncu.
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p build/tests build/bench && cp .devbin/lossjit_tests build/tests/ && cp .devbin/lossjit_bench build/bench/ && cp .devbin/lossjit build/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; git log --oneline -1; } >> $OUT/steps.log 2>&1
t tests
timeout 120 ./build/tests/lossjit_tests --test-suite=gpu -tc='value_and_grad: one kernel*,gradients of broadcast inputs*,gradients: one Loss*,gradients of one value per row*,every row of the language table*' > $OUT/gpu.log 2>&1; echo "tests rc $?" >> $OUT/gpu.log
t ab
for r in 1 2; do
  echo "## before (old), run $r" >> $OUT/ab.txt
  LOSSJIT_CACHE_DIR=/tmp/c-old timeout 60 .devbin-scratch/old/lossjit_bench --examples examples --only value_and_grad --no-sweep --no-accuracy --reps 10 >> $OUT/ab.txt 2>&1
  echo "## after, run $r" >> $OUT/ab.txt
  LOSSJIT_CACHE_DIR=/tmp/c-new timeout 60 ./build/bench/lossjit_bench --examples examples --only value_and_grad --no-sweep --no-accuracy --reps 10 >> $OUT/ab.txt 2>&1
done
t sq
timeout 90 .devbin-scratch/sq > $OUT/sq.txt 2>&1
t explore
LOSSJIT_CACHE_DIR=/tmp/c-new timeout 150 ./build/bench/lossjit_bench --examples examples --only value_and_grad --no-sweep --no-accuracy --reps 10 --explore --json /tmp/explore.json > /tmp/explore.log 2>&1; echo "rc $?" >> /tmp/explore.log
t ncu
H="examples/hinge.loss -i p=32768x32768:uniform -i t=32768:sign --grad p --grad t"
S="examples/squared_hinge.loss -i p=32768x32768:uniform -i t=32768x1:sign --grad p --grad t"
for x in hinge sq; do
  if [ $x = hinge ]; then A=$H; else A=$S; fi
  LOSSJIT_CACHE_DIR=/tmp/c-new timeout 90 ncu --clock-control none -k regex:lossjit_kernel --launch-skip 1 -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis ./build/lossjit run $A > /tmp/ncu-$x.txt 2>&1
done
tar czf $OUT/extra.tgz -C /tmp explore.json explore.log ncu-hinge.txt ncu-sq.txt
t end
