#!/usr/bin/env bash
# Runs the CPU test suites of the default build (build/, as scripts/test.sh makes it), then the C
# API's launch path against a driver that does nothing, under valgrind's memcheck. Definite and indirect leaks and every memory error fail the run. NVRTC is
# closed source and keeps some allocations until exit; scripts/valgrind.supp holds what it owns.
#
#   scripts/valgrind.sh [SUITES]     default: every suite but gpu (which skips without a GPU anyway)
set -euo pipefail
cd "$(dirname "$0")/.."

suites=${1:-parse,check,layout,emit,reference,cache,host,driver,cli,hostile,misuse,fuzz_corpus}
[ -x build/tests/lossjit_tests ] || { cmake -S . -B build && cmake --build build -j"$(nproc)"; }
# The cli suite starts the CLI as a subprocess; valgrind checks the test process only.
LOSSJIT_CACHE_DIR=$(mktemp -d) valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
  --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
  --suppressions=scripts/valgrind.supp --gen-suppressions=all \
  build/tests/lossjit_tests --test-suite="$suites"
# The launch path (plans, the remembered gradient layout, pointer checks, lent scratch), which the
# suites reach only on a GPU, against a driver with no GPU behind it (tests/capi/fake_driver.c).
LOSSJIT_CACHE_DIR=$(mktemp -d) LOSSJIT_LIBCUDA=$PWD/build/tests/liblossjit_fake_driver.so \
  valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
  --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
  --suppressions=scripts/valgrind.supp --gen-suppressions=all \
  build/tests/test_capi launch
