L=build/lossjit; C=examples/cosine.loss
for r in 16384 16896 15840; do echo "== cosine $r"; $L bench $C -i a=${r}x16384:uniform[-1,1] -i b=${r}x16384:uniform[-1,1] --reps 20 -q --sweep blocks_per_sm=0,2 2>&1 | tail -4; done
echo "== cosine 16368 bps2"; $L bench $C -i a=16368x16384:uniform[-1,1] -i b=16368x16384:uniform[-1,1] --reps 20 -q -k blocks_per_sm=2 2>&1 | tail -3
for r in 32768 33792; do echo "== ce $r"; $L bench examples/cross_entropy.loss -i x=${r}x4096:uniform[-4,4] -i y=$r:integers[0,4095]:i64 --reps 20 -q 2>&1 | tail -3; done
