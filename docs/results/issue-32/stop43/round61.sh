#!/bin/bash
# linear_loss: maps of one value per row, float16; the benchmark with the per-token program
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0 PYTHONPATH=$PWD/python
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv > $OUT/env.txt
./build/tests/lossjit_tests -tc="linear_loss*" 2>&1 | grep -v "^$\|MESSAGE\|logged" | tail -6 > $OUT/tests.txt
(cd python && timeout 300 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_gpu.py 2>&1 | grep -v "^DEBUG" | tail -5) > $OUT/pytest.txt
timeout 120 python3 examples/linear_loss.py > $OUT/example.txt 2>&1
timeout 400 python3 bench/linear_loss.py --reps 20 --json $OUT/linear_loss.json > $OUT/bench.txt 2>&1
cat $OUT/env.txt $OUT/tests.txt $OUT/pytest.txt $OUT/example.txt $OUT/bench.txt
