# Round 276: grid sizes of by-row kernels (exp79/lossjit_grid: LJ_GRID_BLOCKS=N sets the grid, -1 the
# fewest blocks that keep ceil(rows/grid) rows each). Alternating, two rounds.
export LOSSJIT_CACHE_DIR=/tmp/ljc
L=exp79/lossjit_grid; C=examples/cosine.loss
cos="-i a=16384x16384:uniform[-1,1] -i b=16384x16384:uniform[-1,1]"
ce="-i x=32768x4096:uniform[-4,4] -i y=32768:integers[0,4095]:i64"
$L bench $C $cos --reps 5 -q > /dev/null 2>&1   # compile once
for round in 1 2; do
  for g in "" -1 528 512 1056 1024 2048; do
    printf "cosine fwd grid=%-5s " "${g:-auto}"; LJ_GRID_BLOCKS=$g $L bench $C $cos --reps 20 -q 2>&1 | grep -E '^1 ' | tr -s ' ' | cut -c1-200
  done
  for g in 264 256; do
    printf "cosine fwd bps=2 grid=%-5s " "$g"; LJ_GRID_BLOCKS=$g $L bench $C $cos --reps 20 -q -k blocks_per_sm=2 2>&1 | grep -E '^1 ' | tr -s ' ' | cut -c1-200
  done
  for g in "" -1 132; do
    printf "ce fwd 32768x4096 grid=%-5s " "${g:-auto}"; LJ_GRID_BLOCKS=$g $L bench examples/cross_entropy.loss $ce --reps 20 -q 2>&1 | grep -E '^1 ' | tr -s ' ' | cut -c1-200
  done
done
for g in "" -1 512 1024; do
  echo "== bench_grid --rows cosine grid=${g:-auto}"; LJ_GRID_BLOCKS=$g timeout 60 exp79/bench_grid --rows --reps 20 --only "cosine 16384x16384" 2>&1 | grep -v LJ_GRID | tail -1
done
