#!/bin/bash
# Round 153 (H200): where the fused row kernels' time goes — SASS, ncu, variants.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
O=$OUT/round153; mkdir -p $O/sass
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt
which ncu cuobjdump >> $O/gpu.txt 2>&1; ncu --version >> $O/gpu.txt 2>&1
for f in build/sass/*.cubin; do n=$(basename $f .cubin); cuobjdump -sass $f > $O/sass/$n.sass 2>&1; done
ldd build/lossjit | grep -i "not found" > $O/ldd.txt
CE16="examples/cross_entropy.loss -i x=16384x32768:uniform[-4,4] -i y=16384:integers[0,32767]:i64 --grad x"
CE32="examples/cross_entropy.loss -i x=32768x4096:uniform[-4,4] -i y=32768:integers[0,4095]:i64 --grad x"
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis"
timeout 120 ncu --clock-control none --kernel-name regex:lossjit --launch-count 2 $SEC build/lossjit run $CE16 > $O/ncu_ce16.txt 2>&1
timeout 120 ncu --clock-control none --kernel-name regex:lossjit --launch-count 2 $SEC build/lossjit run $CE32 > $O/ncu_ce32.txt 2>&1
timeout 120 ncu --clock-control none --kernel-name regex:lossjit --launch-count 1 --section SourceCounters --section WarpStateStats -o $O/ce16src build/lossjit run $CE16 > $O/ncu_ce16src.log 2>&1
ncu -i $O/ce16src.ncu-rep --page source --print-source sass --csv > $O/ce16_source.csv 2>&1
rm -f $O/ce16src.ncu-rep
timeout 240 build/bench/lossjit_bench --rows --reps 10 --variant row_cache=auto --variant fast_math=on --variant unroll=16 --variant block=1024 > $O/variants.txt 2>&1
ls -la $O
