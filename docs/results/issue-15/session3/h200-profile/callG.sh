#!/usr/bin/env bash
# Session 2026-11-23c call G (H200): value+gradient kernel shapes (vg.cu), ncu of KL and the fused kernels, SASS.
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
mkdir -p build/tests build/bench build/src/capi && cp .devbin/lossjit_tests .devbin/test_capi build/tests/ && cp .devbin/lossjit_bench .devbin/lossjit_cold_start build/bench/ && cp .devbin/lossjit build/ && cp -a .devbin/liblossjit_c.so* build/src/capi/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; git log --oneline -1; nvidia-smi --query-gpu=clocks.max.sm,clocks.sm,power.limit --format=csv; } >> $OUT/steps.log 2>&1
t vg
timeout 120 .devbin-scratch/vg > $OUT/vg.txt 2>&1; echo "rc $?" >> $OUT/vg.txt
t sass
mkdir -p /tmp/sass && for c in .devbin-scratch/{kl,sl1vg,hingevg,sqhvg}.cubin; do cuobjdump -sass $c > /tmp/sass/$(basename $c .cubin).sass 2>&1; done
t ncu
M=dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second,dram__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
S="--section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis"
N="ncu --clock-control none -k regex:lossjit_kernel -c 1 $S --metrics $M"
mkdir -p /tmp/ncu
timeout 60 $N ./build/lossjit run examples/kl.loss -i p=16384x16384:softmax -i t=16384x16384:softmax > /tmp/ncu/kl.txt 2>&1
timeout 60 $N ./build/lossjit run examples/smooth_l1.loss -i p=16384x16384:normal -i t=16384x16384:normal --grad p > /tmp/ncu/sl1vg.txt 2>&1
timeout 60 $N ./build/lossjit run examples/hinge.loss -i p=16384x16384:uniform -i t=16384:sign --grad p --grad t > /tmp/ncu/hingevg.txt 2>&1
timeout 60 $N ./build/lossjit run examples/squared_hinge.loss -i p=16384x16384:uniform -i t=16384x1:sign --grad p --grad t > /tmp/ncu/sqhvg.txt 2>&1
timeout 60 $N ./build/lossjit run examples/smooth_l1.loss -i p=16384x16384:normal -i t=16384x16384:normal > /tmp/ncu/sl1.txt 2>&1
t ncu-vg
timeout 60 ncu --clock-control none -k regex:vg2 -c 2 $S --metrics $M .devbin-scratch/vg > /tmp/ncu/vgk.txt 2>&1
tar czf $OUT/ncu-sass.tgz -C /tmp ncu sass
t end
