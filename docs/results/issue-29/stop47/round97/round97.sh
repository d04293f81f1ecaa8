#!/bin/bash
# Round 97: shifted rows (vectors from each row's first aligned column) and amax/amin without FMA
# contraction: their GPU cases, then cross-entropy and L1/L2 norm at row lengths not a multiple of 4.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for T in '*gradient of amax and amin reaches*' '*share an accumulator*'; do
  timeout 120 build/tests/lossjit_tests -ts=gpu -tc="$T" -d > $OUT/case.txt 2>&1; echo "rc $?" >> $OUT/case.txt; cat $OUT/case.txt >> $OUT/cases.txt; grep -E "ERROR|rc |test cases" $OUT/case.txt | head -5
done
for S in "16384x50257 float32" "16384x50256 float32" "16384x50257 bfloat16"; do set -- $S
  timeout 150 python3 bench/odd_rows.py --shape $1 --dtype $2 --reps 20 --json $OUT/odd_rows_$1_$2.json > /dev/null 2>&1; echo "rc $?"
  python3 -c "import json,sys; r=json.load(open('$OUT/odd_rows_$1_$2.json')); print('$1 $2', {k: round(v,3) for k,v in r['forward_ms'].items()}, {k: round(v,3) for k,v in r['fwd_bwd_ms'].items()}, {k: round(v,1) for k,v in r['fwd_bwd_pct_of_floor'].items()}, r['errors'])"
done | tee $OUT/odd_rows.txt
for P in examples/kernelbench/38_L1Norm_.loss examples/kernelbench/39_L2Norm_.loss; do
  echo "== $P 4096x65535"; timeout 100 build/lossjit bench $P -q -i x=4096x65535:normal --reps 10 --sets 1 --sweep vector=1,4 2>&1 | tail -3
done | tee $OUT/norms.txt
echo 'lse = logsumexp(x, -1); mean(lse - x[y])' > /tmp/ce.loss
for S in "16384x50257 f32" "4096x131071 bf16" "32768x4097 f32"; do set -- $S
  echo "== ce $1 $2"; timeout 60 build/lossjit bench /tmp/ce.loss -q -i x=$1:normal:$2 -i "y=${1%%x*}:integers[0,4095]:i64" --reps 10 --sets 1 --sweep vector=1,4 2>&1 | tail -3
done | tee $OUT/ce_fwd.txt
timeout 100 python3 tests/differential/k_takes.py --device cuda --count 60 --seed 97 --log $OUT/ktakes.txt 2>&1 | tail -2
