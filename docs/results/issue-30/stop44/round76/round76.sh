#!/bin/bash
# Round 76: logsumexp-argmax forwards asked for full occupancy (32 registers); A/B against dff25d4 (= fd60d20's library).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
NEW=$PWD/build/src/capi/liblossjit_c.so.1.0 OLD=$PWD/build/ab/liblossjit_c.so.1.0
export LOSSJIT_LIBRARY=$NEW
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for round in 1 2; do
  for lib in old new; do
    if [ $lib = old ]; then L=$OLD; else L=$NEW; fi
    LOSSJIT_LIBRARY=$L LOSSJIT_CACHE_DIR=/tmp/ljcache_$lib timeout 150 python3 bench/several_results.py --shape 16384x32768 --reps 30 --json /tmp/sr_${lib}_$round.json > /dev/null 2>> /tmp/sr_err.txt
    echo "$lib $round: $(python3 -c "import json;d=json.load(open('/tmp/sr_${lib}_$round.json'));print(round(d['three_results_over_one'],4), {k: round(v,4) for k,v in d['forward_ms'].items()})")"
  done
done | tee $OUT/ab.txt
cp /tmp/sr_new_2.json $OUT/several_results_new.json
echo 'lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc' > /tmp/cza.loss
echo 'lse = logsumexp(x, -1); mean(lse - x[y])' > /tmp/ce.loss
for shape in 16384x32768 32768x4096 4096x131072; do for p in ce cza; do for dt in f32 bf16; do
  echo "== $p $shape $dt"; timeout 60 build/lossjit bench /tmp/$p.loss -i x=$shape:normal:$dt -i "y=${shape%%x*}:integers[0,4095]:i64" --reps 30 2>&1 | tail -1
done; done; done > $OUT/bench.txt 2>&1
cat $OUT/bench.txt
timeout 200 build/tests/lossjit_tests -ts=gpu -tc="*share an accumulator*,*reductions match the reference in every team*" > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
tail -4 $OUT/cpp.txt
