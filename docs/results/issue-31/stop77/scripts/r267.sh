#!/usr/bin/env bash
# Round 267 (H200): forward + backward inside torch.compile with main's library before the remembered
# gradient layout (build/old_capi) and with it (build/src/capi), in alternating processes
# (probe_launch.py: the launch, the three stand-ins, torch.compile's own MSE).
set -uo pipefail
S=docs/results/issue-31/stop77/scripts
export TORCH_EXTENSIONS_DIR=/tmp/ljx_ext
gcc -O2 -shared -fPIC $S/stand_ins.c -o /tmp/stand_ins.so
for round in 1 2; do
  for lib in new old; do
    dir=$PWD/build/src/capi; [[ $lib == old ]] && dir=$PWD/build/old_capi
    echo "-- $lib, round $round"
    LOSSJIT_LIBRARY=$dir/liblossjit_c.so.1 python3 $S/probe_launch.py --stand-ins /tmp/stand_ins.so --calls 2000 \
      --rounds ${ROUNDS:-7} --json $OUT/probe_${lib}_$round.json 2>&1 | tail -${TAIL:-4}
  done
done
