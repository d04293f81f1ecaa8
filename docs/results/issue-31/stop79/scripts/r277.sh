# Round 277: main (exp79/bench_grid without LJ_GRID_BLOCKS: main's grids) against the resident-grid
# default (exp79/bench_new), in turn, two rounds; the two row problems it changes on an H200.
export LOSSJIT_CACHE_DIR=/tmp/ljc LOSSJIT_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
for round in 1 2; do
  for b in grid new; do
    echo "== $b round $round"
    exp79/bench_$b --rows --reps 20 --only "cross_entropy 16384x32768" "cosine 16384x16384" 2>&1 | grep -v "^device"
  done
done
echo "== values against the CPU reference (resident grid)"
timeout 60 exp79/lossjit_new run examples/cosine.loss -i a=16384x16384:uniform[-1,1] -i b=16384x16384:uniform[-1,1] --check 2>&1 | tail -4
timeout 60 exp79/lossjit_new run examples/cross_entropy.loss -i x=16384x32768:uniform[-4,4] -i y=16384:integers[0,32767]:i64 --check 2>&1 | tail -4
