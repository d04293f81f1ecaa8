#!/bin/bash
# Round 102 (H200): shifted rows and the amax case on the other GPU.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
timeout 60 build/tests/lossjit_tests -ts=gpu -tc='*gradient of amax and amin reaches*,*share an accumulator*' > $OUT/cases.txt 2>&1; echo "rc $?" >> $OUT/cases.txt; tail -4 $OUT/cases.txt
for S in "16384x50257 float32" "16384x50257 bfloat16"; do set -- $S
  timeout 90 python3 bench/odd_rows.py --shape $1 --dtype $2 --reps 20 > $OUT/odd_$2.json 2>/dev/null; echo "rc $?"
  python3 -c "import json; r=json.load(open('$OUT/odd_$2.json')); print('$1 $2', {k: round(v,3) for k,v in r['forward_ms'].items()}, {k: round(v,3) for k,v in r['fwd_bwd_ms'].items()}, {k: round(v,1) for k,v in r['fwd_bwd_pct_of_floor'].items()})"
done | tee $OUT/odd_rows.txt
