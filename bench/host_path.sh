#!/usr/bin/env bash
# Instructions per call of lossjit's host path (bench/host_path.c) for each of its programs:
# callgrind's inclusive count of lossjit_value_and_grad and lossjit_evaluate over N and 2N repeated
# calls, the difference divided by N (the first call's planning, compiling and loading cancels).
# Needs valgrind and a build folder with lossjit_host_path and the fake driver (tests/).
#
#   bench/host_path.sh [BUILD]      default: build
set -euo pipefail
build=${1:-build}
exe=$build/bench/lossjit_host_path
driver=$build/tests/liblossjit_fake_driver.so
for f in "$exe" "$driver"; do [[ -e $f ]] || { echo "host_path.sh: no $f (cmake --build $build)" >&2; exit 2; }; done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
n=500
count() {  # count PROGRAM CALLS FUNCTION: callgrind's inclusive instructions in FUNCTION
  callgrind_annotate --inclusive=yes "$work/cg.$1.$2" | awk -v f="$3" '$0 ~ ":"f" \\[" && !done {gsub(",", "", $1); print $1; done = 1}'
}
printf '%-32s %14s %14s\n' program value_and_grad evaluate
# Compiled once outside valgrind (NVRTC under it takes minutes); the counted runs load from this cache.
LOSSJIT_LIBCUDA=$driver LOSSJIT_CACHE_DIR=$work/cache "$exe" 1 > /dev/null
for program in 0 1; do
  for calls in $n $((2 * n)); do
    LOSSJIT_LIBCUDA=$driver LOSSJIT_CACHE_DIR=$work/cache valgrind --tool=callgrind --callgrind-out-file="$work/cg.$program.$calls" \
      "$exe" "$calls" "$program" > "$work/out.$program" 2> /dev/null
  done
  name=$(sed 's/ *lossjit_value_and_grad.*//' "$work/out.$program")
  grad=$(( ($(count $program $((2 * n)) lossjit_value_and_grad) - $(count $program $n lossjit_value_and_grad)) / n ))
  value=$(( ($(count $program $((2 * n)) lossjit_evaluate) - $(count $program $n lossjit_evaluate)) / n ))
  printf '%-32s %14s %14s\n' "$name" "$grad" "$value"
done
