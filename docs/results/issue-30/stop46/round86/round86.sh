#!/bin/bash
# Round 86: stop 45's untested GPU changes (K case, the refactored 'other dimensions' case, K programs
# with bindings on the GPU); per-instruction SASS counts of cross-entropy against `loss, acc`.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
which ncu cuobjdump nvdisasm >> $OUT/gpu.txt 2>&1
echo 'lse = logsumexp(x, -1); mean(lse - x[y])' > /tmp/ce.loss
echo 'lse = logsumexp(x, -1); loss = mean(lse - x[y]); acc = mean(argmax(x, -1) == y); loss, acc' > /tmp/ca.loss
for p in ce ca; do
  timeout 100 ncu --clock-control none --kernel-name lossjit_kernel --launch-count 1 --section SourceCounters --section InstructionStats -f -o /tmp/rep_$p build/lossjit run /tmp/$p.loss -i x=16384x32768:normal -i "y=16384:integers[0,32767]:i64" > $OUT/ncu_$p.log 2>&1
  timeout 60 ncu -i /tmp/rep_$p.ncu-rep --page source --csv --print-source sass > /tmp/sass_$p.csv 2>&1
  gzip -c /tmp/sass_$p.csv > $OUT/sass_$p.csv.gz
  ls -la /tmp/sass_$p.csv >> $OUT/ncu_$p.log
done
timeout 200 build/tests/lossjit_tests -ts=gpu -tc="*takes of K indices*,*along other dimensions*" -d > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
grep -E "ERROR|test cases|assertions|rc |s: row" $OUT/cpp.txt | head -20
timeout 120 python3 tests/differential/k_takes.py --device cuda --count 60 --seed 86 > $OUT/k_takes.txt 2>&1; echo "k_takes rc $?" >> $OUT/k_takes.txt
tail -5 $OUT/k_takes.txt
head -c 3000 /tmp/sass_ce.csv
