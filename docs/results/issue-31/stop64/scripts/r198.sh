#!/bin/bash
# Round 198 (stop 64, H200): a program's own row sums split where that saves a walk (split_row_sums,
# src/ir/row_sums.cpp): label smoothing's forward walks each row once instead of twice.
# `bash r198.sh bench`: the value kernel (lossjit bench, the defaults) of the library before
# (exp63/closed: main at 3fbcbe8's kernels) and after (exp64/split), in turn, at four shapes; then
# label smoothing and focal forward + backward through autograd (bench/class_losses.py) before and
# after. `bash r198.sh tests`: this change's GPU tests of row programs and the GPU random differential.
# Build here first; copy build/lossjit, build/tests/lossjit_tests and build/src/capi/liblossjit_c.so.1.0
# into exp64/split/. Carry exp63/closed and exp64/split.
part=${1:-bench}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu_$part.txt
ln -sf liblossjit_c.so.1.0 exp63/closed/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp64/split/liblossjit_c.so.1
if [ "$part" = bench ]; then
  for s in 16384x32768 16384x32000 8192x49152 32768x4096; do
    N=${s%x*}; C=${s#*x}
    for lib in exp63/closed exp64/split exp63/closed exp64/split; do
      echo "== label smoothing forward $s $lib"
      LOSSJIT_CACHE_DIR=/tmp/c_$(basename $lib) timeout 60 $lib/lossjit bench examples/cross_entropy_smoothing.loss \
        -i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64 -q 2>&1 | grep -E "^ *[0-9]+ |GB/s"
    done
  done > $OUT/forward.txt 2>&1
  cat $OUT/forward.txt
  k=0
  for lib in exp63/closed exp64/split exp63/closed exp64/split; do
    k=$((k + 1))
    LOSSJIT_CACHE_DIR=/tmp/c_$(basename $lib) LOSSJIT_LIBRARY=$PWD/$lib/liblossjit_c.so.1 timeout 80 python3 \
      bench/class_losses.py --shape 16384x32768 --reps 20 > $OUT/autograd_${k}_$(basename $lib).txt 2>&1
    echo "class_losses $lib: exit $?"
  done
  exit 0
fi
export LOSSJIT_LIBRARY=$PWD/exp64/split/liblossjit_c.so.1
i=0
for tc in "*fused value and gradients match*" "*row prefetch gives*" "*one value per row ([N, 1])*,*class-weight gradients*" \
          "*maps that reduce*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 400 exp64/split/lossjit_tests -tc="$tc" --duration=true > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 330 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 198 --time-limit 300 --cli exp64/split/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
