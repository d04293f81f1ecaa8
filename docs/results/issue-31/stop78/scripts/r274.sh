#!/bin/bash
# Round 274 (prepared by stop 78, not run: its device time was spent). exp78/harness274 at 16384 x
# 32768, three rounds: N (main's printed kernel), Nc and Ne (make_variants.py: the once-a-row code as
# the hand-written C has it: the next row's index loaded after the merges, no seed loads a row, the
# row after next's base computed where its tile is loaded; Nc keeps the seed in shared memory, Ne
# as a RowProgram member, the form the printer can print: ptxas, no spills either), C. Then Nsight
# Compute on Nc and Ne. If Ne is C's time, the printer's change is printer_ne.patch (a later
# round: the library with it against main, lossjit_bench --rows and bench/row_variants.py, and the
# GPU tests of fused values and gradients).
# Build with scripts/build.sh; carry exp78.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 100 exp78/harness274 16384 32768 > $OUT/harness.txt 2>&1
LJ_PROFILE=1 timeout 200 ncu --clock-control none -k 'regex:lossjit_kernel_n[ce]' \
  --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SourceCounters \
  -o /tmp/r274 exp78/harness274 16384 32768 > /tmp/ncu_run.txt 2>&1
ncu -i /tmp/r274.ncu-rep --page source --csv --print-source sass > /tmp/source.csv 2>&1
{ cat /tmp/ncu_run.txt; python3 exp78/ncu_rows.py /tmp/source.csv lossjit_kernel_nc lossjit_kernel_ne; } > $OUT/ncu.txt 2>&1
python3 exp78/sass_lines.py /tmp/source.csv 524288 lossjit_kernel_nc lossjit_kernel_ne > $OUT/sass_lines.txt 2>&1
grep -v PROF $OUT/ncu.txt | head -30; cat $OUT/harness.txt
