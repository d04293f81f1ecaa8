#!/usr/bin/env bash
# Builds lossjit and runs every test suite. GPU suites skip, saying so, where there is no GPU.
# Where clang is installed, a short fuzz run follows (build-fuzz/, ASan + UBSan; about two minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
rm -f build/differential.txt
ctest --test-dir build --output-on-failure
# The differential test's summary: how many random programs, which seed, how long. Its absence means
# it was skipped (no python3 with torch), which install-deps.sh should have made impossible.
if [ -f build/differential.txt ]; then
  cat build/differential.txt
else
  echo "test: the differential test did not run (is python3-torch installed?)" >&2
  exit 1
fi
if command -v clang++ >/dev/null 2>&1; then
  scripts/fuzz.sh smoke "${LOSSJIT_FUZZ_SECONDS:-30}"
else
  echo "test: clang++ not found, skipping the fuzz smoke test"
fi
