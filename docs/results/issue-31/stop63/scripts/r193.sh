#!/bin/bash
# Round 193 (stop 63, H200): focal loss and label smoothing forward + backward against torch.compile
# and torch eager (bench/class_losses.py), with this stop's library (exp63/closed: the take's adjoint
# summed in closed form) and, at 16384 x 32768 float32, the library before it (exp63/head).
# Carry exp63/head/liblossjit_c.so.1.0 and exp63/closed/liblossjit_c.so.1.0 (built as r192.sh says).
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
ln -sf liblossjit_c.so.1.0 exp63/head/liblossjit_c.so.1
ln -sf liblossjit_c.so.1.0 exp63/closed/liblossjit_c.so.1
run() {  # library, shape, dtype
  LOSSJIT_LIBRARY=$PWD/exp63/$1/liblossjit_c.so.1 timeout 170 python3 bench/class_losses.py --shape $2 --dtype $3 --reps 20 \
    --json $OUT/$1_$2_$3.json > /dev/null 2> $OUT/$1_$2_$3.err
  echo "$1 $2 $3: exit $?"
}
run closed 16384x32768 float32
run head 16384x32768 float32
run closed 16384x32768 bfloat16
run closed 8192x49152 float32
