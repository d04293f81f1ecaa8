#!/bin/bash
# Round 117 (H100): ncu of one forward + backward of layer norm and softmax (prof.py), lossjit and
# torch.compile. Carry build/src/capi/liblossjit_c.so.1.0.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
R=docs/results/issue-29/stop51/round117
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 $R/prof.py --time 2>&1 | grep -v -i warn | tee $OUT/times.txt
timeout 350 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --section WarpStateStats --section SchedulerStats \
  python3 $R/prof.py > $OUT/ncu.txt 2>&1
echo "ncu rc $?"; grep -c "^  [a-z_]" $OUT/ncu.txt; tail -3 $OUT/ncu.txt
