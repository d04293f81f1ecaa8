#!/usr/bin/env bash
# Builds lossjit and runs every test suite. GPU suites skip, saying so, where there is no GPU.
# Where clang is installed, a short fuzz run follows (build-fuzz/, ASan + UBSan; about two minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure
if command -v clang++ >/dev/null 2>&1; then
  scripts/fuzz.sh smoke "${LOSSJIT_FUZZ_SECONDS:-30}"
else
  echo "test: clang++ not found, skipping the fuzz smoke test"
fi
