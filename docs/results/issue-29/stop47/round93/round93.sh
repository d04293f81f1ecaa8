#!/bin/bash
# Round 93: the GPU random-program differentials after stop 46's accumulator change; unroll 3/5/6
# on the GPU; rows whose length is not a multiple of 4 (L1 norm, cross-entropy) against their
# aligned twins; the Python fwd+bwd overhead profile.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
( timeout 200 python3 tests/differential/differential.py --device cuda --count 300 --seed 93 --cli build/lossjit --time-limit 150 --log $OUT/diff.txt > $OUT/diff_out.txt 2>&1; echo "rc $?" >> $OUT/diff_out.txt )
tail -3 $OUT/diff_out.txt
( timeout 150 python3 tests/differential/k_takes.py --device cuda --count 60 --seed 93 --log $OUT/ktakes.txt > $OUT/ktakes_out.txt 2>&1; echo "rc $?" >> $OUT/ktakes_out.txt )
tail -3 $OUT/ktakes_out.txt
echo 'lse = logsumexp(x, -1); mean(lse - x[y])' > /tmp/ce.loss
echo 'lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc' > /tmp/cza.loss
for P in ce cza; do for S in "16384x32768 f32" "4096x131072 bf16"; do set -- $S
  echo "== $P $1 $2 unroll 3,5,6"; timeout 60 build/lossjit bench /tmp/$P.loss -q -i x=$1:normal:$2 -i "y=${1%%x*}:integers[0,4095]:i64" --reps 10 --sets 1 --sweep unroll=3,5,6 2>&1 | tail -5
done; done | tee $OUT/unroll356.txt
for C in 65535 65536; do
  echo "== L1 8192x$C"; timeout 120 build/lossjit bench examples/kernelbench/38_L1Norm_.loss -q -i x=8192x$C:normal --reps 10 --sets 1 --sweep unroll=1,4,8,16 --sweep block=512,1024 2>&1 | tail -10
  echo "== CE 16384x$C"; timeout 60 build/lossjit bench /tmp/ce.loss -q -i x=16384x$C:normal -i "y=16384:integers[0,4095]:i64" --reps 10 --sets 1 2>&1 | tail -2
done | tee $OUT/misaligned.txt
for C in 50257 50256; do timeout 150 python3 bench/several_results.py --shape 16384x$C --reps 20 2>&1 | tail -12; done | tee $OUT/ce50257.txt
timeout 100 python3 build/gpu/prof_fwdbwd.py > $OUT/prof.txt 2>&1; tail -60 $OUT/prof.txt
