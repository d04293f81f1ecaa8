#!/bin/bash
# Round 255 (H200): the Python tests with the native autograd path (GPU + CPU parts), then
# bench/python_overhead.py with the native path built, its rows beside the Python Function's.
set -u
R=$OUT/r255
mkdir -p $R
S=$R/summary.txt
export TORCH_EXTENSIONS_DIR=/tmp/ljx_ext
timeout 300 python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_gpu.py python/tests/test_native.py python/tests/test_cpu.py > $R/pytest.txt 2>&1
echo "pytest exit $?" >> $S
tail -15 $R/pytest.txt >> $S
timeout 250 python3 bench/python_overhead.py --calls 5000 --repeats 5 --build-native --json $R/overhead.json > $R/overhead.txt 2>&1
echo "overhead exit $?" >> $S
grep "fwd+bwd\|native\|direct path\|F.mse_loss" $R/overhead.txt >> $S
cat $S
