#!/usr/bin/env bash
# Round 27 (2026-11-26, H100): loss, z, acc with registers for 8 blocks of 256 per SM (32 registers,
# no spill on NVRTC sm_90) against main's 40, alternating; cross-entropy beside. lossjit_minb is main
# with an environment variable (LJ_MINB) setting the kernel's minimum blocks per SM: an experiment.
set -u
export LOSSJIT_CACHE_DIR=/tmp/ljcache
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
IN="-i x=16384x32768:normal -i y=16384:integers[0,32767]:i64"
CE='lse = logsumexp(x, -1); mean(lse - x[y])'
THREE='lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc'
for round in 1 2 3; do
  for mb in 1 8; do
    for name in CE THREE; do
      P=${!name}
      r=$(LJ_MINB=$mb timeout 60 build/gpu/lossjit_minb bench "$P" $IN --reps 15 --sets 1 --json -q 2>>$OUT/err.txt | python3 -c "
import json,sys; d=json.load(sys.stdin)
print(' | '.join(f\"b{v['block_threads']} u{v['unroll']} {v['ms']:.4f} r{v['registers']} local {v['local_bytes']} {v['roofline_fraction']:.3f} occ {v['occupancy']}\" for v in d['rows'][:1]))" 2>>$OUT/err.txt)
      echo "round $round minb $mb $name $r" | tee -a $OUT/minb.txt
    done
  done
done
