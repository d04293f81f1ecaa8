#!/bin/bash
# Round 253 (H200): L2 eviction hints in the cross-entropy value + gradient kernels (exp75/edit_l2.py):
# checks of every hand-edited kernel against the CPU reference (a poisoned one must fail: the hook
# applies), then cross-entropy 4096 x 131072 (clusters of 4, each block keeping 82% of its share)
# with each edit, in turn, twice.
set -u
R=$OUT/r253
mkdir -p $R/raw
B=exp75/bin
P=$PWD/exp75/patch
export LOSSJIT_CACHE=off
S=$R/summary.txt
chk() {  # name patch shape
  local n=$1 p=$2 s=$3
  LJX_PATCH=$P/$p timeout 90 $B/lossjit run examples/cross_entropy.loss -i x=$s:normal \
    -i y=${s%x*}:integers[0,$((${s#*x} - 1))]:i64 --grad x --check > $R/raw/check_$n.txt 2>&1
  echo "check $n $s exit $? $(grep -c '(ok' $R/raw/check_$n.txt) ok" >> $S
}
for m in poison keep first store sonly; do chk c4_$m c4_$m.cu 300x131072; done
for m in poison keep first store sonly; do chk a1024_$m a1024_$m.cu 300x65536; done
for i in 1 2; do
  for m in none keep first store sonly; do
    LJX_PATCH=$P/c4_$m.cu timeout 100 $B/lossjit_bench --rows --reps 10 --examples examples \
      --only "cross_entropy 4096x131072" > $R/raw/c4_${m}_$i.txt 2>&1
    echo "c4 $m $i $(grep 'value+grad' $R/raw/c4_${m}_$i.txt | sed 's/  */ /g' | tr '\n' ' ')" >> $S
  done
done
cat $S
tar czf $R/raw.tgz -C $R raw && rm -rf $R/raw
