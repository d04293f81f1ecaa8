#!/bin/bash
# Round 201 (stop 65, H100): issue 31's targets on main (e9618ed) on an H100, the first H100 since
# stop 57. `bash r201.sh rows`: bench/run_rows.sh (lossjit_bench --rows: cross-entropy forward at
# three shapes, cosine, triplet, each value with its gradients; then bench/rows_torch.py), the five
# problems (KL's % of the read roofline) and bench/class_losses.py (cross-entropy, focal, label
# smoothing through autograd against torch.compile). `bash r201.sh python`: bench/torch_bench.py (the
# five problems in torch) and bench/python_overhead.py at 1024 elements (the figure).
# Run from the repository root on the GPU machine with build/ carried.
part=${1:-rows}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_SOURCE_DIR=$PWD
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1 LOSSJIT_CACHE_DIR=/tmp/lj_cache
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu_$part.txt
if [ "$part" = rows ]; then
  timeout 300 bash bench/run_rows.sh $OUT/rows --reps 20 > $OUT/rows.txt 2>&1; echo "rows exit $?" >> $OUT/rows.txt
  timeout 120 build/bench/lossjit_bench --no-sweep --reps 20 --json $OUT/five.json > $OUT/five.txt 2>&1
  echo "five exit $?" >> $OUT/five.txt
  timeout 150 python3 bench/class_losses.py --shape 16384x32768 --reps 20 > $OUT/class_losses.txt 2>&1
  echo "class_losses exit $?" >> $OUT/class_losses.txt
  tail -3 $OUT/rows.txt $OUT/five.txt $OUT/class_losses.txt
  exit 0
fi
timeout 200 python3 bench/torch_bench.py --no-sweep --reps 20 --json $OUT/torch.json > $OUT/torch.txt 2>&1
echo "torch exit $?" >> $OUT/torch.txt
timeout 330 python3 bench/python_overhead.py --n 1024 --calls 5000 --repeats 5 --json $OUT/overhead.json \
  > $OUT/overhead.txt 2>&1
echo "overhead exit $?" >> $OUT/overhead.txt
tail -30 $OUT/overhead.txt
