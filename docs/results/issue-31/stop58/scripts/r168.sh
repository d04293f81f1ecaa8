#!/bin/bash
# Round 168 (one H200): KL's term without the reciprocal of a (templates/lj_log.cuh: the term as
# fma(a, log(q), r)) against the library before it (build-old, HEAD's templates), 512 and 1024
# threads, three rounds in turn; the SASS of both kernels; the GPU tests of KL's term.
export LOSSJIT_SOURCE_DIR=$PWD LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
for v in old512 new512 old1024 new1024; do
  echo "== $v" >> $OUT/sass.txt
  cuobjdump -sass build/sass/kl-$v.cubin >> $OUT/sass.txt 2>&1
done
prog='batchmean(xlogy(t, t) - t * log(p))'
for round in 1 2 3; do
  for b in build-old build; do
    echo "== round $round: $b" >> $OUT/kl.txt
    LOSSJIT_CACHE_DIR=/tmp/ljcache-$b $b/lossjit bench "$prog" -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 20 --sets 1 -q --sweep block=512,1024 >> $OUT/kl.txt 2>&1
  done
done
LOSSJIT_CACHE_DIR=/tmp/ljcache-tests timeout 200 build/tests/lossjit_tests -tc="KL*" > $OUT/gpu_tests.txt 2>&1
echo "tests exit $?" >> $OUT/gpu_tests.txt
# the new term's block x unroll (the default unroll for KL is 4)
LOSSJIT_CACHE_DIR=/tmp/ljcache-build build/lossjit bench "$prog" -i p=16384x16384:softmax -i t=16384x16384:softmax --reps 20 --sets 1 -q --sweep block=256,512,1024 --sweep unroll=2,4,8 > $OUT/sweep.txt 2>&1
