#!/bin/bash
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
timeout 60 python3 build/gpu/dbg43.py cuda 2>&1 | grep -c nan
LOSSJIT_EXPERIMENT_NO_FMAD=1 timeout 60 python3 build/gpu/dbg43.py cuda 2>&1 | grep -c nan
LOSSJIT_EXPERIMENT_NO_FMAD=1 timeout 100 python3 tests/differential/k_takes.py --device cuda --count 60 --seed 93 2>&1 | tail -2
timeout 100 python3 build/gpu/prof_fwdbwd.py > $OUT/prof.txt 2>&1; head -8 $OUT/prof.txt
for C in 50257 50256; do timeout 100 python3 bench/several_results.py --shape 16384x$C --reps 20 2>&1 | tail -12; done | tee $OUT/ce50257.txt
