#!/usr/bin/env bash
# Session 2026-11-23b call A (H100): issue 13's last GPU checks and issue 14's re-run on main 99a7e2a.
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/build/src/capi
mkdir -p build/tests build/bench build/src/capi && cp .devbin/lossjit_tests .devbin/test_capi build/tests/ && cp .devbin/lossjit_bench .devbin/lossjit_cold_start build/bench/ && cp .devbin/lossjit build/ && cp -a .devbin/liblossjit_c.so* build/src/capi/
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s" >> $OUT/steps.log; }
{ nvidia-smi -L; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; git log --oneline -1; } >> $OUT/steps.log 2>&1
t rows-torch
timeout 100 python3 scripts/compare_rows_torch.py --lossjit build/lossjit --scratch /dev/shm --json $OUT/rows-torch.json > $OUT/rows-torch.log 2>&1; echo "rc $?" >> $OUT/rows-torch.log
t capi
{ timeout 30 ./build/tests/test_capi; echo "rc $?"; timeout 30 ./build/tests/test_capi gpu; echo "rc $?"; } > $OUT/capi.log 2>&1
t pytest
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
timeout 100 python3 -m pytest -q -rs -p no:cacheprovider python/tests > $OUT/pytest.log 2>&1; echo "pytest rc=$?" >> $OUT/pytest.log
t overhead
timeout 70 python3 bench/python_overhead.py --calls 20000 --repeats 5 --json $OUT/overhead.json > $OUT/overhead.log 2>&1; echo "rc $?" >> $OUT/overhead.log
t gpu-tests
timeout 260 ./build/tests/lossjit_tests --test-suite=gpu -d > $OUT/gpu-tests.log 2>&1; echo "tests rc $?" >> $OUT/gpu-tests.log
t end
