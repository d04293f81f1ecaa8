#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_CACHE_DIR=/tmp/c_new
O=$OUT/r164; mkdir -p $O
for c in 32768 32000; do
 for f in cross_entropy cross_entropy_z_acc focal; do
  for k in "" "-k block=1024"; do
   echo "== $f $c $k" >> $O/info.txt
   build/lossjit run examples/$f.loss -i x=16384x$c:normal -i y=16384:integers[0,31999]:i64 --grad x --timings $k 2>&1 | grep -i "kernel\|ms" >> $O/info.txt
  done
 done
 for k in "" "-k block=1024"; do
  echo "== distill $c $k" >> $O/info.txt
  build/lossjit run examples/distill_kl.loss -i s=16384x$c:normal -i t=16384x$c:normal --grad s --timings $k 2>&1 | grep -i "kernel\|ms" >> $O/info.txt
 done
done
cd $OUT && tar czf r164.tgz r164 && rm -rf r164
