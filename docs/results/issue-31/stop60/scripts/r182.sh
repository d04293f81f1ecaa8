#!/bin/bash
# Round 182 (not run at stop 60; for the next H200): the harness with P4 (the next row's loads after
# the tile's gradient, where ptxas put the hand-written kernel's), and bisect: the hand-written
# schedule with the printed kernel's differences added one at a time. Build first, here:
# AHEAD=... COPIES=build/lossjit docs/results/issue-31/stop60/scripts/build.sh; carry exp60/harness,
# exp60/bisect.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
(cd exp60 && for s in "16384 32768" "16384 32000" "8192 49152"; do timeout 100 ./harness $s; done) > $OUT/harness.txt 2>&1
(cd exp60 && for s in "16384 32768" "16384 32000"; do timeout 100 ./bisect $s; done) > $OUT/bisect.txt 2>&1
