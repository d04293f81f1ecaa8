#!/usr/bin/env bash
# Round 28 (2026-11-26, H100): where loss, z, acc's 11% over the cross-entropy goes (Nsight Compute,
# if the machine has it and lets it read counters); then the whole gpu suite on main.
set -u
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CLI=$PWD/build/lossjit LOSSJIT_CACHE_HAMMER=$PWD/build/tests/lossjit_cache_hammer
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
export LOSSJIT_CACHE_DIR=/tmp/ljcache
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LD_LIBRARY_PATH=$PWD/build/src/capi:${LD_LIBRARY_PATH:-}
nvidia-smi -L > $OUT/env.txt; cat $OUT/env.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}" | tee $OUT/ncu.txt
IN="-i x=16384x32768:normal -i y=16384:integers[0,32767]:i64"
CE='lse = logsumexp(x, -1); mean(lse - x[y])'
THREE='lse = logsumexp(x, -1); loss = mean(lse - x[y]); z = mean(lse^2); acc = mean(argmax(x, -1) == y); loss, z, acc'
if [ -n "${NCU:-}" ]; then
  for name in CE THREE; do
    P=${!name}
    timeout 90 $NCU --kernel-name lossjit_kernel --launch-count 1 --section SpeedOfLight --section WarpStateStats --section InstructionStats --section Occupancy build/lossjit run "$P" $IN > $OUT/ncu_$name.txt 2>&1; echo "rc $?" >> $OUT/ncu_$name.txt
    grep -E "Duration|Memory Throughput|Executed Ipc|Issue Slots Busy|Warp Cycles Per Issued|Stall|Registers|Achieved Occupancy|Executed Instructions|rc |ERR" $OUT/ncu_$name.txt | head -30
  done
fi
echo "== gpu suite at $(elapsed) s"
timeout 330 build/tests/lossjit_tests --test-suite=gpu --test-case-exclude='*full size*' > $OUT/gpu_suite.txt 2>&1; echo "rc $?" >> $OUT/gpu_suite.txt
grep -E "ERROR|test cases|assertions|Status|rc " $OUT/gpu_suite.txt | head -30
echo "== end at $(elapsed) s"
