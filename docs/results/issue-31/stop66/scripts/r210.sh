#!/bin/bash
# Round 210 (stop 66, H200): a warp's rows of one input, values alone, three ways, each program's
# default with each CLI in turn, twice: exp66/base (main at 75a9c8c: 512 threads x unroll 4),
# exp66/new (256 x 8), exp66/cap (512 x 8 with registers for 1024 threads an SM, __launch_bounds__(512, 2)).
# Then the GPU tests of row programs and the GPU random differential with exp66/cap's build.
# Carry exp66/base, exp66/new, exp66/cap (lossjit, lossjit_tests, liblossjit_c.so.1.0).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
for v in base new cap; do cp -r exp66/c_$v /tmp/c_$v; done  # kernels compiled here (scripts/warm210.sh)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
cases() {
  for s in 32768x4096 65536x2048 16384x8192; do
    N=${s%x*}; C=${s#*x}; y="-i y=$N:integers[0,$((C-1))]:i64"
    for p in cross_entropy cross_entropy_smoothing focal cross_entropy_z_acc; do echo "$p $s|examples/$p.loss|-i x=$s:normal $y"; done
    echo "cross_entropy_bf16 $s|examples/cross_entropy.loss|-i x=$s:normal:bf16 $y"
    echo "lse_mean $s|mean(logsumexp(x, -1))|-i x=$s:normal"
    echo "amax_mean $s|mean(amax(x, -1))|-i x=$s:normal"
  done
  for q in 'sum(x, -1)' 'argmax(x, -1)' 'logsumexp(x, -1)'; do echo "map $q 32768x4096|$q|-i x=32768x4096:normal"; done
}
for round in 1 2; do
  cases | while IFS='|' read -r name prog inputs; do
    for v in base new cap; do
      line=$(LOSSJIT_CACHE_DIR=/tmp/c_$v timeout 30 exp66/$v/lossjit bench "$prog" $inputs -q 2>&1 | grep -E "^ *1 ")
      echo "$round | $name | $v | $line"
    done
  done
done > $OUT/three.txt 2>&1
echo "three: $(wc -l < $OUT/three.txt) lines"
export LOSSJIT_LIBRARY=$PWD/exp66/cap/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp66/cap/liblossjit_c.so.1
i=0
for tc in "row programs: reductions*,row programs: logsumexp and argmax*" "row programs: out-of-range*,row programs: rank 3*" \
          "every input dtype*" "row programs: a mean and*,row programs: group norm*"; do
  (LOSSJIT_CACHE_DIR=/tmp/c_t$i timeout 200 exp66/cap/lossjit_tests -tc="$tc" > $OUT/tests_$i.txt 2>&1;
   echo "exit $?" >> $OUT/tests_$i.txt) &
  i=$((i + 1))
done
(LOSSJIT_CACHE_DIR=/tmp/c_d timeout 230 python3 -u tests/differential/differential.py --device cuda --count 300 \
   --seed 210 --time-limit 200 --cli exp66/cap/lossjit > $OUT/differential.txt 2>&1; echo "exit $?" >> $OUT/differential.txt) &
wait
cat $OUT/tests_*.txt > $OUT/tests.txt; rm $OUT/tests_*.txt
grep -h -E "test cases|assertions|exit|SKIPPED" $OUT/tests.txt
tail -4 $OUT/differential.txt
