#!/usr/bin/env bash
# Installs the build folder's lossjit into a scratch prefix, builds examples/embed.cpp against it
# through find_package(lossjit), and runs it: on a machine without a GPU it prints the CPU reference.
# Usage: tests/install/run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd); source=$(cd "${2:?source dir}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source/tests/install" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" \
      -DEMBED_SOURCE="$source/examples/embed.cpp" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/consumer" >/dev/null
output=$("$scratch/consumer/embed")
echo "$output"
# Either the GPU's results or, without one, the reason and the CPU reference's value.
grep -Eq "smooth_l1\(beta=1\) += [0-9]|CPU reference: [0-9]" <<<"$output"
