#!/bin/bash
# Round 115 (H100): eager reductions' forward + backward with the fused kernel in backward (the
# upstream gradient multiplied in) against the package before it (build/py-before, HEAD's
# python/lossjit), the same library (build/new-bin). Carry build/{src/capi/liblossjit_c.so.1.0,
# new-bin,py-before}. The GPU pytest first; then eager.py and bench/python_overhead.py alternating.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export LOSSJIT_LIBRARY=$PWD/build/new-bin/liblossjit_c.so.1.0
R=docs/results/issue-31/stop50/round115
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 260 python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_gpu.py 2>&1 | tail -15
for k in 1 2; do
  X=""; [ $k = 1 ] && X=--reference
  timeout 90 python3 -u $R/eager.py python new $X 2>&1 | grep -v -i warn
  timeout 60 python3 -u $R/eager.py build/py-before before 2>&1 | grep -v -i warn
done
sed 's|parents\[1\] / "python"|parents[0]|' bench/python_overhead.py > build/py-before/python_overhead.py
timeout 60 python3 bench/python_overhead.py --calls 4000 --repeats 5 2>&1 | grep " us "
echo before; timeout 60 python3 build/py-before/python_overhead.py --calls 4000 --repeats 5 2>&1 | grep " us "
