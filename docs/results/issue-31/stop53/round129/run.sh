#!/bin/bash
# Round 129 (one GPU a call): the row losses with the defaults (forward and value + gradient, % of
# the read roofline and of the one-read-one-write floor), then value + gradient in row clusters of
# 2, 4 and 8 (each block keeps its share of the row: 4096 x 131072's 512 KB rows on chip at 4).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
build/bench/lossjit_bench --rows --reps 10 --json $OUT/rows.json > $OUT/rows.txt 2>&1
build/bench/lossjit_bench --rows --reps 10 --variant row_cache=auto --variant row_cluster=2 --variant row_cluster=4 --variant row_cluster=8 --json $OUT/clusters.json > $OUT/clusters.txt 2>&1
