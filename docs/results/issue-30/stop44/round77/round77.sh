#!/bin/bash
# Round 77: the final code (c8d53bd): bench/class_weights.py as committed, the class-weights tests.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
timeout 200 build/tests/lossjit_tests -ts=gpu -tc="*class-weight*,*share an accumulator*,*one value per row ([N, 1])*" > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
tail -4 $OUT/cpp.txt
(cd python && timeout 120 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_gpu.py -k "weighted" 2>&1 | grep -v "^DEBUG" | tail -2) > $OUT/py.txt 2>&1
tail -1 $OUT/py.txt
timeout 150 python3 bench/class_weights.py --shape 16384x32768 --reps 20 --json $OUT/class_weights_f32.json > /dev/null 2> $OUT/cw_err.txt
timeout 150 python3 bench/class_weights.py --shape 4096x131072 --dtype bfloat16 --reps 20 --json $OUT/class_weights_bf16.json > /dev/null 2>> $OUT/cw_err.txt
python3 - <<'P' $OUT
import json, sys
for f in ("class_weights_f32.json", "class_weights_bf16.json"):
    d = json.load(open(f"{sys.argv[1]}/{f}"))
    print(f, d["dtype"], d["shape"])
    for name, t in d["fwd_bwd_ms"].items():
        print("  ", name, {k: round(v, 3) for k, v in t.items()}, {k: round(v, 3) for k, v in d["ratios"][name].items()})
        print("   errors", {k: f"{v:.2e}" for k, v in d["errors"][name].items()})
P
