#!/usr/bin/env bash
# Installs the build folder's lossjit into a scratch prefix and builds programs against it as a user
# would: examples/embed.cpp and tests/install/consumer.c through find_package(lossjit) (with no C++
# standard of their own), consumer.c again through pkg-config, and runs them. Without a GPU
# embed prints the CPU reference.
# Usage: tests/install/run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd); source=$(cd "${2:?source dir}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
prefix="$scratch/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
# The package names no path of the machine it was built on: NVRTC comes from the consumer's toolkit.
if grep -rq "libnvrtc" "$prefix"/lib*/cmake/lossjit/lossjitTargets*.cmake; then
  echo "install: the exported targets name NVRTC by a path" >&2; exit 1
fi
cmake -S "$source/tests/install" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DEMBED_SOURCE="$source/examples/embed.cpp" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/consumer" >/dev/null
output=$("$scratch/consumer/embed")
echo "$output"
# Either the GPU's results or, without one, the reason and the CPU reference's value.
grep -Eq "smooth_l1\(beta=1\) += [0-9]|CPU reference: [0-9]" <<<"$output"
libdir=$(dirname "$(find "$prefix" -name 'liblossjit_c.so.1' | head -1)")
c_output=$(LD_LIBRARY_PATH="$libdir" "$scratch/consumer/consumer_c")
echo "$c_output"
grep -q "inputs p t" <<<"$c_output" && grep -q "a mistake at column 9" <<<"$c_output"
# pkg-config: the flags alone build and link the C program.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
cc -o "$scratch/consumer_pc" "$source/tests/install/consumer.c" $(pkg-config --cflags --libs lossjit)
LD_LIBRARY_PATH="$libdir" "$scratch/consumer_pc" | grep -q "a mistake at column 9"
echo "install: find_package(lossjit) (C++ and C) and pkg-config lossjit work"
