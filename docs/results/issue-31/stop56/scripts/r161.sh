#!/bin/bash
# Round 161 (H100): HEAD's library, the diet with j alone in the walks' loads (cur), the diet with the
# loads' stride multiply kept (new), alternating; the GPU random-program differential on new.
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1; export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
O=$OUT/r161; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt
for r in 1 2; do
  for b in build-old build-cur build; do
    exe=$b/bench/lossjit_bench; [ $b = build-cur ] && exe=build-cur/lossjit_bench
    LOSSJIT_CACHE_DIR=/tmp/c_$b timeout 150 $exe --rows --reps 10 --examples examples --no-accuracy > $O/$b.$r.txt 2>&1
  done
done
LOSSJIT_CACHE_DIR=/tmp/c_build timeout 250 python3 tests/differential/differential.py --device cuda --count 600 --seed 5601 --time-limit 200 --cli build/lossjit > $O/differential.txt 2>&1; echo "exit $?" >> $O/differential.txt
tail -3 $O/differential.txt
for r in 1 2; do for b in build-old build-cur build; do echo "== $b $r"; sed -n 3,7p $O/$b.$r.txt; done; done
