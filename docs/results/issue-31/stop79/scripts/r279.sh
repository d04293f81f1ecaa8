# Round 279: values and gradients of fused row kernels the resident grid launches on an H200 (4608
# rows: beyond the 4224 slots), against the CPU reference.
export LOSSJIT_CACHE_DIR=/tmp/ljc
L=build/lossjit
timeout 45 $L run examples/cross_entropy.loss -i x=4608x32768:normal:bf16 -i y=4608:integers[0,32767]:i64 --grad x --check 2>&1 | grep -E "check|rror"
timeout 45 $L run examples/cross_entropy.loss -i x=4608x50257:normal -i y=4608:integers[0,50256]:i64 --grad x --check 2>&1 | grep -E "check|rror"
timeout 45 $L run examples/distill_kl.loss -i s=4608x32000:normal -i t=4608x32000:normal --grad s --check 2>&1 | grep -E "check|rror"
