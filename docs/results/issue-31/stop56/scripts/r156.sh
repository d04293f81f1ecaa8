#!/bin/bash
# Round 156 (H200): source-level ncu of the new fused kernels (cross-entropy 16384x32768, cosine).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_CACHE_DIR=/tmp/c_new
O=$OUT/r156; mkdir -p $O
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis --section SourceCounters"
prof() {
  name=$1; shift
  ncu --clock-control none --kernel-name regex:lossjit --launch-count 12 --section LaunchStats build/lossjit run "$@" > $O/$name.launches.txt 2>&1
  idx=$(awk '/lossjit_kernel \(/{k++} /Dynamic Shared Memory Per Block/{ if ($NF+0 > 0) { print k-1; exit } }' $O/$name.launches.txt)
  timeout 150 ncu --clock-control none --kernel-name regex:lossjit --launch-skip $idx --launch-count 1 $SEC -o $O/$name build/lossjit run "$@" > $O/$name.log 2>&1
  ncu -i $O/$name.ncu-rep --page details > $O/$name.details.txt 2>&1
  ncu -i $O/$name.ncu-rep --page source --print-source sass --csv > $O/$name.source.csv 2>&1
  rm -f $O/$name.ncu-rep
}
prof ce16 examples/cross_entropy.loss -i x=16384x32768:uniform[-4,4] -i y=16384:integers[0,32767]:i64 --grad x
prof cos examples/cosine.loss -i a=16384x16384:uniform[-1,1] -i b=16384x16384:uniform[-1,1] --grad a --grad b
cd $OUT && tar czf r156.tgz r156 && rm -rf r156
