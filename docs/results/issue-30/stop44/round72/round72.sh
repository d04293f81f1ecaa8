#!/bin/bash
# Round 72: class-weight gradients scattered on the GPU (issue 30).
export LOSSJIT_SOURCE_DIR=$PWD LOSSJIT_CACHE_DIR=/tmp/ljcache LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LOSSJIT_LIBRARY=$PWD/build/src/capi/liblossjit_c.so.1.0
ln -sf liblossjit_c.so.1.0 build/src/capi/liblossjit_c.so.1
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
cat > /tmp/cew.loss <<'P'
l = logsumexp(x, -1) - x[y]; sum(where(y != -1, w[y] * l, 0)) / sum(where(y != -1, w[y], 0))
P
( compute-sanitizer --tool memcheck build/lossjit run /tmp/cew.loss -i x=3000x5000:normal -i "y=3000:integers[-1,4999]:i64" -i w=5000:uniform --grad w --grad x --check 2>&1 | tail -8 ) > $OUT/sanitizer.txt 2>&1
( build/lossjit run /tmp/cew.loss -i x=3000x5000:normal -i "y=3000:integers[-1,4999]:i64" -i w=5000:uniform --grad w --grad x --check 2>&1 | tail -8 ) > $OUT/cli.txt 2>&1
timeout 300 build/tests/lossjit_tests -ts=gpu -tc="*class-weight*,*one value per row*,*fused value and gradients match*,*gradients of maps that reduce*" > $OUT/cpp.txt 2>&1; echo "cpp rc $?" >> $OUT/cpp.txt
(cd python && timeout 300 python3 -m pytest -q -p no:cacheprovider -p no:logging tests/test_gpu.py -k "weighted or row_losses or several_results or vocab_parallel_pair" 2>&1 | grep -v "^DEBUG" | tail -15) > $OUT/py.txt 2>&1
timeout 200 python3 tests/differential/differential.py --device cuda --count 200 --seed 181 --cli build/lossjit > $OUT/diff.txt 2>&1; echo "diff rc $?" >> $OUT/diff.txt
timeout 150 python3 bench/class_weights.py --shape 16384x32768 --reps 20 --json $OUT/cw_f32.json > /dev/null 2> $OUT/cw_err.txt
timeout 150 python3 bench/class_weights.py --shape 4096x131072 --dtype bfloat16 --reps 20 --json $OUT/cw_bf16.json > /dev/null 2>> $OUT/cw_err.txt
tail -5 $OUT/cpp.txt $OUT/py.txt $OUT/diff.txt $OUT/sanitizer.txt $OUT/cli.txt
grep -h "w_costs\|over_compile\|grad w\|lossjit value\|torch.compile fwd" $OUT/cw_*.json
