#!/bin/bash
# Round 81: the K scatter's duplicate check, serial (60b6e9f's parent form, build/ab) against one pass
# of independent loads (60b6e9f); the distillation against torch.compile and the cross-entropy.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
md5sum build/src/capi/liblossjit_c.so.1.0 build/ab/liblossjit_c.so.1.0 | tee $OUT/builds.txt
for rep in 1 2; do
  for lib in new old; do
    so=$PWD/build/src/capi/liblossjit_c.so.1.0; [ $lib = old ] && so=$PWD/build/ab/liblossjit_c.so.1.0
    LOSSJIT_LIBRARY=$so timeout 150 python3 bench/distill_topk.py --shape 16384x32768 --k 64 --reps 10 --json $OUT/ab_${lib}_$rep.json > /dev/null 2>&1
    python3 -c "import json; r=json.load(open('$OUT/ab_${lib}_$rep.json')); print('$lib', $rep, {k: round(v, 4) for k, v in r['ms'].items() if 'lossjit' in k})" | tee -a $OUT/ab.txt
  done
done
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
timeout 150 python3 bench/distill_topk.py --shape 16384x32768 --k 8 --reps 10 --json $OUT/k8.json > /dev/null 2>&1; echo "k8 rc $?"
timeout 150 python3 bench/distill_topk.py --shape 4096x131072 --k 64 --dtype bfloat16 --reps 10 --json $OUT/bf16.json > /dev/null 2>&1; echo "bf16 rc $?"
python3 - <<'PY' | tee $OUT/summary.txt
import json, os
out = os.environ["OUT"]
for f in ["ab_new_2.json", "k8.json", "bf16.json"]:
    r = json.load(open(f"{out}/{f}"))
    print(f, r["shape"], r["k"], r["dtype"], "errors", {k: f"{v:.1e}" for k, v in r["errors"].items()})
    print("  ms", {k: round(v, 3) for k, v in r["ms"].items()})
    print("  ratios", {k: round(v, 3) for k, v in r["ratios"].items()})
PY
