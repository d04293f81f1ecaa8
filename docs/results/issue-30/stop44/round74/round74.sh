#!/bin/bash
# Round 74: several totals get the cross-entropy's grid (partials per total); A/B against fd60d20.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
NEW=$PWD/build/src/capi/liblossjit_c.so.1.0 OLD=$PWD/build/ab/liblossjit_c.so.1.0
export LOSSJIT_LIBRARY=$NEW
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for round in 1 2 3; do
  for lib in old new; do
    if [ $lib = old ]; then L=$OLD; else L=$NEW; fi
    LOSSJIT_LIBRARY=$L LOSSJIT_CACHE_DIR=/tmp/ljcache_$lib timeout 150 python3 bench/several_results.py --shape 16384x32768 --reps 30 --json /tmp/sr_${lib}_$round.json > /dev/null 2>> /tmp/sr_err.txt
    echo "$lib $round: $(python3 -c "import json;d=json.load(open('/tmp/sr_${lib}_$round.json'));print(round(d['three_results_over_one'],4), {k: round(v,4) for k,v in list(d['forward_ms'].items())+list(d['fwd_bwd_ms'].items())})")"
  done
done | tee $OUT/ab.txt
cp /tmp/sr_new_3.json $OUT/several_results_new.json
timeout 200 build/tests/lossjit_tests -ts=gpu -tc="*reductions match the reference in every team*,*fused value and gradients match*,*class-weight*,*along other dimensions match*" > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
tail -4 $OUT/cpp.txt
(cd python && timeout 240 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_gpu.py 2>&1 | grep -v "^DEBUG" | tail -4) > $OUT/py.txt 2>&1
tail -3 $OUT/py.txt
