#!/bin/bash
# Round 75: Nsight Compute of the cross-entropy forward against `loss, z, acc` (issue 30's 5% target).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
echo 'lse = logsumexp(x, -1); mean(lse - x[y])' > /tmp/ce.loss
echo 'lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc' > /tmp/cza.loss
echo 'lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); loss, z' > /tmp/cz.loss
echo 'lse = logsumexp(x, -1); loss = mean(lse - x[y]); acc = mean(argmax(x, -1) == y); loss, acc' > /tmp/ca.loss
M=gpu__time_duration.sum,sm__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__block_size,smsp__thread_inst_executed_per_inst_executed.ratio,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.sum,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio
for p in ce cza cz ca; do
  echo "== $p"
  timeout 120 ncu --clock-control none --kernel-name lossjit_kernel --launch-count 1 --metrics $M build/lossjit run /tmp/$p.loss -i x=16384x32768:normal -i "y=16384:integers[0,32767]:i64" 2>&1 | grep -E "^\s+(gpu__|sm__|dram__|launch__|smsp__)" 
done > $OUT/ncu.txt 2>&1
for p in ce cza cz ca; do echo "== $p"; timeout 60 build/lossjit bench /tmp/$p.loss -i x=16384x32768:normal -i "y=16384:integers[0,32767]:i64" --reps 30 2>&1 | tail -3; done > $OUT/bench.txt 2>&1
cat $OUT/ncu.txt $OUT/bench.txt
