#!/bin/bash
# Round 248 (H200): why lossjit's bulk-copied row cache (stop 73's patch, exp74/bin built with it and
# with LJX_PATCH, which compiles a hand-edited kernel in place of the generated one whose variant line
# matches) trails the hand-written harness. 1) correctness of each hand edit (lossjit run --check);
# 2) lossjit_bench cross-entropy 16384x32768 value+grad: main's default, bulk at five tile shapes,
# bulk 512x4 with each hand edit, in turn, twice; 3) the harness in the same call.
set -u
R=$OUT/r248
mkdir -p $R
B=exp74/bin
P=$PWD/exp74/patch
export LOSSJIT_CACHE=off
K="-k row_prefetch=on -k row_cache=on -k block=512 -k unroll=4"
for p in base stcs take merge all; do
  for s in 1000x32768 700x20000; do
    LJX_BULK=1 LJX_PATCH=$P/$p.cu timeout 60 $B/lossjit run examples/cross_entropy.loss -i x=$s:normal \
      -i y=${s%x*}:integers[0,$((${s#*x} - 1))]:i64 --grad x --check $K > $R/check_${p}_$s.txt 2>&1
    echo "$p $s exit $?" | tee -a $R/check.txt
  done
done
V="--variant row_prefetch=on,row_cache=on,block=512,unroll=4 --variant row_prefetch=on,row_cache=on,block=1024,unroll=2
 --variant row_prefetch=on,row_cache=on,block=256,unroll=8 --variant row_prefetch=on,row_cache=on,block=512,unroll=8
 --variant row_prefetch=on,row_cache=on,block=1024,unroll=4"
for i in 1 2; do
  timeout 60 $B/lossjit_bench --rows --reps 10 --examples examples --only "cross_entropy 16384x32768" \
    --variant row_cache=auto > $R/main_$i.txt 2>&1
  LJX_BULK=1 timeout 90 $B/lossjit_bench --rows --reps 10 --examples examples --only "cross_entropy 16384x32768" \
    $V > $R/bulk_$i.txt 2>&1
  for p in stcs take merge all; do
    LJX_BULK=1 LJX_PATCH=$P/$p.cu timeout 60 $B/lossjit_bench --rows --reps 10 --examples examples \
      --only "cross_entropy 16384x32768" --variant row_prefetch=on,row_cache=on,block=512,unroll=4 > $R/patch_${p}_$i.txt 2>&1
  done
done
for f in $R/main_*.txt $R/bulk_*.txt $R/patch_*.txt; do echo "== $(basename $f)"; grep "value+grad" $f; done | tee $R/summary.txt
timeout 90 exp74/tma_rows 16384 32768 10 1 > $R/tma.txt 2>&1; echo "tma exit $?" >> $R/tma.txt
grep "ring=cache\|exit" $R/tma.txt | head -20
