#!/bin/bash
# Round 87: logsumexp's reference with a slack, two-phase team merges, the argmax's first column
# without a branch (A/B against 8d66338, the CLI's bench and bench/several_results.py alternating);
# the shared-accumulator GPU test (ties, nan, inf, ramps, rows far below 0).
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
NEW=$PWD/build/src/capi/liblossjit_c.so.1.0 OLD=$PWD/build/ab/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
echo 'lse = logsumexp(x, -1); mean(lse - x[y])' > /tmp/ce.loss
echo 'lse = logsumexp(x, -1); loss = mean(lse - x[y]); acc = mean(argmax(x, -1) == y); loss, acc' > /tmp/ca.loss
echo 'lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc' > /tmp/cza.loss
echo 'softmax(x, -1)' > /tmp/sm.loss
LOSSJIT_CACHE_DIR=/tmp/ljcache timeout 200 build/tests/lossjit_tests -ts=gpu -tc="*share an accumulator*" > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
tail -4 $OUT/cpp.txt
for round in 1 2; do for cli in old new; do
  if [ $cli = old ]; then B=build/ab/lossjit_old; else B=build/lossjit; fi
  for case in "ce 16384x32768 f32" "ca 16384x32768 f32" "cza 16384x32768 f32" "ce 4096x131072 bf16" "cza 4096x131072 bf16" "ce 32768x4096 f32" "sm 16384x32768 f32"; do
    set -- $case
    yin="-i y=${2%%x*}:integers[0,4095]:i64"; [ $1 = sm ] && yin=""
    echo "$round $cli $case $(LOSSJIT_CACHE_DIR=/tmp/ljcache_$cli timeout 60 $B bench /tmp/$1.loss -q -i x=$2:normal:$3 $yin --reps 20 --sets 1 2>&1 | tail -1)"
  done
done; done | tee $OUT/ab.txt
for lib in old new; do
  if [ $lib = old ]; then L=$OLD; else L=$NEW; fi
  LOSSJIT_LIBRARY=$L LOSSJIT_CACHE_DIR=/tmp/ljcache_$lib timeout 150 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/sr_$lib.json > $OUT/sr_$lib.txt 2>&1
  echo "$lib: $(python3 -c "import json;d=json.load(open('$OUT/sr_$lib.json'));print(round(d['three_results_over_one'],4), {k: round(v,4) for k,v in d['forward_ms'].items()})")"
done | tee -a $OUT/ab.txt
