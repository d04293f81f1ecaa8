#!/usr/bin/env bash
set -o pipefail; export LD_LIBRARY_PATH=/usr/local/cuda/lib64
{ nvidia-smi -L; } > $OUT/gpu.log 2>&1
timeout 100 .devbin/lossjit_tests --test-suite=gpu -d -tc='layouts*,every input dtype*,log and xlogy*,maps write every*,sizes around*,fused gradients into*' >> $OUT/gpu.log 2>&1; echo "tests rc $?" >> $OUT/gpu.log
