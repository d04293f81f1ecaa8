#!/bin/bash
# Round 154 (H200): ncu of the fused value+gradient kernels themselves (the launch with a row cache).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
O=$OUT/round154; mkdir -p $O/sass
for f in build/sass/*.cubin; do n=$(basename $f .cubin); cuobjdump -sass $f > $O/sass/$n.sass 2>&1; done
(cd $O && tar czf sass.tgz sass && rm -rf sass)
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section InstructionStats --section ComputeWorkloadAnalysis --section SourceCounters"
prof() {  # name, program args...
  name=$1; shift
  ncu --clock-control none --kernel-name regex:lossjit --launch-count 12 --section LaunchStats build/lossjit run "$@" > $O/$name.launches.txt 2>&1
  idx=$(awk '/lossjit_kernel \(/{k++} /Dynamic Shared Memory Per Block/{ if ($NF+0 > 0) { print k-1; exit } }' $O/$name.launches.txt)
  echo "$name: launch $idx" >> $O/index.txt
  timeout 150 ncu --clock-control none --kernel-name regex:lossjit --launch-skip $idx --launch-count 1 $SEC -o $O/$name build/lossjit run "$@" > $O/$name.log 2>&1
  ncu -i $O/$name.ncu-rep --page details > $O/$name.details.txt 2>&1
  ncu -i $O/$name.ncu-rep --page source --print-source sass --csv > $O/$name.source.csv 2>&1
  rm -f $O/$name.ncu-rep
}
prof ce16 examples/cross_entropy.loss -i x=16384x32768:uniform[-4,4] -i y=16384:integers[0,32767]:i64 --grad x
prof ce32 examples/cross_entropy.loss -i x=32768x4096:uniform[-4,4] -i y=32768:integers[0,4095]:i64 --grad x
prof tri examples/triplet.loss -i a=32768x8192:uniform[-1,1] -i p=32768x8192:uniform[-1,1] -i n=32768x8192:uniform[-1,1] --grad a --grad p --grad n
(cd $O && gzip -9 *.source.csv)
ls -la $O
