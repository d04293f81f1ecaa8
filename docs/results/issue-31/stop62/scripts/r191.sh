#!/bin/bash
# Round 191 (prepared at stop 62, for the next GPU; not run): the take picked out of the walk ahead
# in the printer (p12_printer.patch on stop 62's main: the row's own values loaded a row ahead into
# Ahead, as stop 61's p5_printer.patch; the takes of a cached input picked by the row before as it
# reads the next row in, and by the team's first walk; the slots one array a block, take_slots).
# It prints round 190's P12 for the cross-entropy (the same statements; ptxas: 64 registers, 672
# bytes of shared memory, no spills, as the hand-made one). (1) Through the library: the committed
# defaults against the patch with ByRowWalkAheadMaxThreads' row at 1024, in turn. (2) With that
# build: the GPU tests that run walked-ahead row kernels with takes, the GPU differential, in parallel.
# Build here first, from the repository root on main:
#   mkdir -p exp63/head exp63/p12 && cmake --build build && cp build/src/capi/liblossjit_c.so.1.0 exp63/head/
#   git apply docs/results/issue-31/stop62/scripts/p12_printer.patch
#   sed -i 's/DefaultRow{D::ByRowWalkAheadMaxThreads, G::Any, 512,/DefaultRow{D::ByRowWalkAheadMaxThreads, G::Any, 1024,/' \
#     src/codegen/kinds/defaults.cpp && cmake --build build
#   cp build/src/capi/liblossjit_c.so.1.0 exp63/p12/ && cp build/lossjit build/tests/lossjit_tests exp63/p12/
#   git checkout src/codegen/kinds/by_rows_emit.cpp src/codegen/kinds/defaults.cpp && cmake --build build
# Carry exp63/head/liblossjit_c.so.1.0, exp63/p12/liblossjit_c.so.1.0, exp63/p12/lossjit,
# exp63/p12/lossjit_tests.
# Run at stop 63 in two calls (one 600 s call cannot hold both): `bash r191.sh programs`, then
# `bash r191.sh tests`.
part=${1:-all}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
ln -sf liblossjit_c.so.1.0 exp63/head/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp63/p12/liblossjit_c.so.1
if [ "$part" != tests ]; then
for s in 16384x32768 16384x32000 8192x49152; do
  for lib in head p12 head p12; do
    echo "== $s library $lib"
    LOSSJIT_LIBRARY=$PWD/exp63/$lib/liblossjit_c.so.1 timeout 50 python3 bench/row_variants.py --shape $s --reps 10 \
      --only cross-entropy --only "label smoothing" --only "class weights" --only "loss, z and accuracy" --only focal
  done
done > $OUT/programs.txt 2>&1
fi
[ "$part" = programs ] && exit 0
export LOSSJIT_LIBRARY=$PWD/exp63/p12/liblossjit_c.so.1
i=0
for tc in "*fused value and gradients match*" "*row prefetch gives*" "*one value per row ([N, 1])*,*class-weight gradients*" \
          "*maps that reduce*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 330 exp63/p12/lossjit_tests -tc="$tc" --duration=true > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 300 python3 -u tests/differential/differential.py --device cuda --count 200 \
   --seed 191 --time-limit 270 --cli exp63/p12/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
