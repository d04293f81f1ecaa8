#!/usr/bin/env bash
# Builds the library, the CLI and the test suites with AddressSanitizer (+ LeakSanitizer) and
# UndefinedBehaviorSanitizer in build-sanitize/ and runs every CPU suite (the GPU suite skips
# without a GPU). Any report fails the run: -fno-sanitize-recover makes UBSan abort too.
#
#   scripts/sanitize.sh [SANITIZERS]     default: address,undefined
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizers=${1:-address,undefined}
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOSSJIT_SANITIZE="$sanitizers" \
  -DLOSSJIT_BUILD_BENCH=OFF >/dev/null
cmake --build build-sanitize -j"$(nproc)"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(pwd)/scripts/lsan.supp:print_suppressions=0}
ctest --test-dir build-sanitize --output-on-failure
