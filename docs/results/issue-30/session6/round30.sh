#!/usr/bin/env bash
# Round 30 (2026-11-26, H100): loss, z, acc: the shared accumulator's per-group work. B: main (checks
# nan, a new maximum and a row of -inf per group); E: one test per group (a new maximum or a nan),
# a row of -inf answered by index(); F: E with the rare path a call (__noinline__: 32 registers, a
# 48-byte frame); A: a54cf76. Alternating, then Nsight Compute's instruction counts for each.
set -u
export LOSSJIT_CACHE_DIR=/tmp/ljcache
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
md5sum build/gpu/lossjit_* | tee $OUT/builds.txt
IN="-i x=16384x32768:normal -i y=16384:integers[0,32767]:i64"
CE='lse = logsumexp(x, -1); mean(lse - x[y])'
THREE='lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc'
for round in 1 2; do
  for v in A B E F; do
    for name in CE THREE; do
      [ $v = A ] && [ $name = CE ] && continue
      P=${!name}
      r=$(timeout 60 build/gpu/lossjit_$v bench "$P" $IN --reps 15 --sets 1 --json -q 2>>$OUT/err.txt | python3 -c "
import json,sys; d=json.load(sys.stdin)
print(' | '.join(f\"b{v['block_threads']} u{v['unroll']} {v['ms']:.4f} r{v['registers']} local {v['local_bytes']} {v['roofline_fraction']:.3f} err {v['rel_error']:.2e}\" for v in d['rows'][:1]))" 2>>$OUT/err.txt)
      echo "round $round $v $name $r" | tee -a $OUT/ab.txt
    done
  done
done
for v in B E F; do
  timeout 60 /usr/local/cuda/bin/ncu --kernel-name lossjit_kernel --launch-count 1 --section InstructionStats --section WarpStateStats build/gpu/lossjit_$v run "$THREE" $IN > $OUT/ncu_$v.txt 2>&1
  echo "$v $(grep -E 'Executed Instructions  ' $OUT/ncu_$v.txt | head -1) $(grep -E 'Avg. Active Threads' $OUT/ncu_$v.txt)" | tee -a $OUT/ncu_summary.txt
  grep -E "^(loss|z|acc) =" $OUT/ncu_$v.txt | tr '\n' ' ' | tee -a $OUT/ncu_summary.txt; echo | tee -a $OUT/ncu_summary.txt
done
