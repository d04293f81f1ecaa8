#!/bin/bash
# Round 116 (H100): the GPU pytest with both ways of an eager reduction's fused kernel (the fixture
# fused_way), then bench/eager_backward.py: the fused kernel in forward against in backward, one
# process, by size, torch eager and torch.compile beside. Carry build/src/capi/liblossjit_c.so.1.0.
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
export LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1
R=docs/results/issue-31/stop51/round116
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_gpu.py 2>&1 | tail -8 > $OUT/pytest.txt
cat $OUT/pytest.txt
timeout 240 python3 -u bench/eager_backward.py --compile --json $OUT/eager_backward.json 2>&1 | grep -v -i warn | tee $OUT/eager_backward.txt
