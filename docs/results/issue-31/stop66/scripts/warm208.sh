#!/bin/bash
# Fills exp66/cache with round 208's family sweep kernels (compiled here, --gpu h200: NVRTC needs no GPU).
export LOSSJIT_CACHE_DIR=$PWD/exp66/cache
for s in 32768x4096 65536x2048 16384x8192; do
  N=${s%x*}; C=${s#*x}
  for prog in cross_entropy cross_entropy_smoothing focal cross_entropy_z_acc cross_entropy_weighted; do
    extra=(); [ $prog = cross_entropy_weighted ] && extra=(-i w=$C:uniform[0.5,2])
    for t in warp block; do for u in 2 4 8; do for b in 256 512 1024; do
      build/lossjit compile examples/$prog.loss -i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64 "${extra[@]}" --gpu h200 \
        -k row_team=$t -k unroll=$u -k block=$b > /dev/null 2>&1 || echo "fail $prog $s $t $u $b"
    done; done; done
    build/lossjit compile examples/$prog.loss -i x=$s:normal -i y=$N:integers[0,$((C-1))]:i64 "${extra[@]}" --gpu h200 > /dev/null 2>&1
    echo "done $prog $s"
  done
done
