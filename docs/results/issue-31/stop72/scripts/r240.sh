#!/bin/bash
# Prepared for the next H100 (not run in stop 72): whether the H200's register bound for a block's
# row of several inputs (ByRowBlockSeveralInputsMaxRegisters: 64) also helps the H100, where the
# defaults table keeps none. The `registers` knob (auto: the H100's default, no bound) against 64 and
# 48, cosine, triplet and a row MSE; one input set (the CPU reference of three 1 GiB inputs takes most
# of a 40 s limit). Build first (cmake --build build), copy build/lossjit into exp72/new/, carry exp72.
# Run from the repository root.
set -u
R=$OUT/r240
mkdir -p $R
L=exp72/new/lossjit
for s in 16384x16384 8192x32768; do
  echo "== cosine $s" >> $R/sweeps.txt
  timeout 60 $L bench examples/cosine.loss -i a=$s:normal -i b=$s:normal --sets 1 --sweep registers=auto,64,48 >> $R/sweeps.txt 2>&1
  echo "== mse rows $s" >> $R/sweeps.txt
  timeout 60 $L bench "mean(sum((a - b)^2, -1))" -i a=$s:normal -i b=$s:normal --sets 1 --sweep registers=auto,64 >> $R/sweeps.txt 2>&1
done
echo "== triplet 8192x16384" >> $R/sweeps.txt
timeout 60 $L bench examples/triplet.loss -i a=8192x16384:normal -i p=8192x16384:normal -i n=8192x16384:normal --sets 1 --sweep registers=auto,64 >> $R/sweeps.txt 2>&1
grep -h "^==\|^[0-9]" $R/sweeps.txt
