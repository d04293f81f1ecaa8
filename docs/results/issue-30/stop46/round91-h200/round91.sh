#!/bin/bash
# Round 91 (H200, the machine round 90 had warmed): bench/several_results.py with stop 46's library,
# then 8d66338's (build/ab).
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH; ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
for lib in new old; do if [ $lib = old ]; then L=$PWD/build/ab/liblossjit_c.so.1.0; else L=$PWD/build/src/capi/liblossjit_c.so.1.0; fi; LOSSJIT_LIBRARY=$L LOSSJIT_CACHE_DIR=/tmp/ljcache_$lib timeout 150 python3 bench/several_results.py --shape 16384x32768 --reps 20 --json $OUT/sr_$lib.json > $OUT/sr_$lib.txt 2>&1; echo "$lib: $(python3 -c "import json;d=json.load(open('$OUT/sr_$lib.json'));print(round(d['three_results_over_one'],4), d['forward_ms'], d['fwd_bwd_ms'])")"; done | tee $OUT/ab.txt
