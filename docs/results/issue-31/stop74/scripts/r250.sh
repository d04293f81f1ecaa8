#!/bin/bash
# Round 250 (H200): row clusters of sizes other than 2, 4, 8 (exp74: the knob and the emitter take 1-8):
# clusters of 3 or 6 use all 132 SMs where 4 and 8 leave some idle. Checks first, then
# lossjit_bench's cross-entropy 4096 x 131072 (and 16384 x 32768) at each cluster size, in turn.
set -u
R=$OUT/r250
mkdir -p $R/raw
B=exp74/bin
S=$R/summary.txt
export LOSSJIT_CACHE=off
for c in 3 5 6 7; do
  for s in 300x131072 200x50000; do
    timeout 60 $B/lossjit run examples/cross_entropy.loss -i x=$s:normal -i y=${s%x*}:integers[0,$((${s#*x} - 1))]:i64 \
      --grad x --check -k row_cluster=$c > $R/raw/check_${c}_$s.txt 2>&1
    echo "check cluster $c $s exit $? $(grep -c '(ok' $R/raw/check_${c}_$s.txt) ok" >> $S
  done
done
V=""
for c in 2 3 4 5 6 8; do V="$V --variant row_cluster=$c"; done
for i in 1 2; do
  timeout 150 $B/lossjit_bench --rows --reps 10 --examples examples --only "cross_entropy 4096x131072" \
    --variant row_cache=auto $V > $R/raw/ce131072_$i.txt 2>&1
  grep "value+grad" $R/raw/ce131072_$i.txt >> $S
done
timeout 150 $B/lossjit_bench --rows --reps 10 --examples examples --only "cross_entropy 16384x32768" \
  --variant row_cache=auto --variant row_cluster=2 --variant row_cluster=3 > $R/raw/ce32768.txt 2>&1
grep "value+grad" $R/raw/ce32768.txt >> $S
cat $S
tar czf $R/raw.tgz -C $R raw && rm -rf $R/raw
