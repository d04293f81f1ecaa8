#!/bin/bash
# Round 157 (H200): the new fused kernels with the prefetch, in clusters, at other unrolls: timings and
# where the prefetch's time goes (ncu, source level).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_CACHE_DIR=/tmp/c_new
O=$OUT/r157; mkdir -p $O
timeout 240 build/bench/lossjit_bench --rows --reps 10 --no-accuracy --only "cross_entropy 16384x32768" --only "cosine 16384x16384" --only "cross_entropy 32768x4096" \
  --variant row_cache=auto --variant row_cluster=2 --variant unroll=4 --variant block=1024 --variant block=1024,row_prefetch=on --variant block=256 > $O/variants.txt 2>&1
SEC="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section LaunchStats --section SourceCounters"
ncu --clock-control none --kernel-name regex:lossjit --launch-count 12 --section LaunchStats build/lossjit run examples/cross_entropy.loss -i x=16384x32768:uniform[-4,4] -i y=16384:integers[0,32767]:i64 --grad x -k row_prefetch=on > $O/launches.txt 2>&1
idx=$(awk '/lossjit_kernel \(/{k++} /Dynamic Shared Memory Per Block/{ if ($NF+0 > 0) { print k-1; exit } }' $O/launches.txt)
timeout 150 ncu --clock-control none --kernel-name regex:lossjit --launch-skip $idx --launch-count 1 $SEC -o $O/pf build/lossjit run examples/cross_entropy.loss -i x=16384x32768:uniform[-4,4] -i y=16384:integers[0,32767]:i64 --grad x -k row_prefetch=on > $O/pf.log 2>&1
ncu -i $O/pf.ncu-rep --page details > $O/pf.details.txt 2>&1
ncu -i $O/pf.ncu-rep --page source --print-source sass --csv > $O/pf.source.csv 2>&1
rm -f $O/pf.ncu-rep
cd $OUT && tar czf r157.tgz r157 && rm -rf r157
