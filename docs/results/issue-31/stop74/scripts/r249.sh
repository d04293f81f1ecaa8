#!/bin/bash
# Round 249 (H200): the row's merge in one barrier (warps' parts double-buffered by the row's parity)
# in main's default cross-entropy kernel (the walk ahead, 1024 threads) and in the bulk-copied cache
# at 256 x 8, 512 x 4, 1024 x 2; each hand edit checked against the CPU reference first.
set -u
R=$OUT/r249
mkdir -p $R/raw
B=exp74/bin
P=$PWD/exp74/patch
export LOSSJIT_CACHE=off
S=$R/summary.txt
chk() {  # name patch env knobs...
  local n=$1 p=$2 e=$3; shift 3
  env $e LJX_PATCH=$P/$p timeout 60 $B/lossjit run examples/cross_entropy.loss -i x=1000x32768:normal \
    -i y=1000:integers[0,32767]:i64 --grad x --check "$@" > $R/raw/check_$n.txt 2>&1
  echo "check $n exit $? $(grep -c '(ok' $R/raw/check_$n.txt) ok" >> $S
}
chk main_merge main_merge.cu X=1
chk b256_merge b256_merge.cu LJX_BULK=1 -k row_prefetch=on -k row_cache=on -k block=256 -k unroll=8
chk b512_merge merge.cu LJX_BULK=1 -k row_prefetch=on -k row_cache=on -k block=512 -k unroll=4
chk b1024_merge b1024_merge.cu LJX_BULK=1 -k row_prefetch=on -k row_cache=on -k block=1024 -k unroll=2
bench() {  # name patch env variant
  env $3 LJX_PATCH=$P/$2 timeout 60 $B/lossjit_bench --rows --reps 10 --examples examples \
    --only "cross_entropy 16384x32768" --variant $4 > $R/raw/bench_$1_$i.txt 2>&1
  echo "$1 $(grep 'value+grad' $R/raw/bench_$1_$i.txt | sed 's/.*value+grad//' | tr '\n' ' ')" >> $S
}
for i in 1 2 3; do
  bench main none X=1 row_cache=auto
  bench main_merge main_merge.cu X=1 row_cache=auto
  bench b256 none LJX_BULK=1 row_prefetch=on,row_cache=on,block=256,unroll=8
  bench b256_merge b256_merge.cu LJX_BULK=1 row_prefetch=on,row_cache=on,block=256,unroll=8
  bench b512_merge merge.cu LJX_BULK=1 row_prefetch=on,row_cache=on,block=512,unroll=4
  bench b1024_merge b1024_merge.cu LJX_BULK=1 row_prefetch=on,row_cache=on,block=1024,unroll=2
done
cat $S
tar czf $R/raw.tgz -C $R raw && rm -rf $R/raw
