#!/bin/bash
# one GPU session: pytest of the new package, the overhead bench of the new and of the old package
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
R=$PWD; D=$PWD/.devbin-py
export LOSSJIT_LIBRARY=$D/liblossjit_c.so.1
CALLS=${CALLS:-10000}
{ nvidia-smi -L; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"; } > $OUT/env.log 2>&1
cd $D && timeout ${T_PYTEST:-55} python3 -m pytest -q -rs -p no:cacheprovider python/tests > $OUT/pytest.log 2>&1; echo "pytest rc=$? $(date +%T)" >> $OUT/pytest.log
cd $D && timeout ${T_NEW:-50} python3 bench/python_overhead.py --calls $CALLS --repeats 5 --json $OUT/overhead.json --profile $OUT/profile.txt > $OUT/overhead.log 2>&1; echo "bench rc=$? $(date +%T)" >> $OUT/overhead.log
cd $R && timeout ${T_OLD:-40} python3 bench/python_overhead.py --calls $CALLS --repeats 5 --json $OUT/overhead-before.json > $OUT/overhead-before.log 2>&1; echo "bench rc=$? $(date +%T)" >> $OUT/overhead-before.log
cd $R && { timeout 12 python3 $D/sides.py $R/python before; timeout 12 python3 $D/sides.py $D/python after; date +%T; } > $OUT/sides.log 2>&1
ls -la $OUT
