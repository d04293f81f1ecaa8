#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan + UBSan) in build-fuzz/ and runs it.
#
#   scripts/fuzz.sh smoke [SECONDS]        replay fuzz/corpus and fuzz/regressions, then fuzz briefly (CI)
#   scripts/fuzz.sh run SECONDS [WORKERS]  fuzz for real; new inputs go to build-fuzz/corpus-work
#   scripts/fuzz.sh merge                  minimize build-fuzz/corpus-work into fuzz/corpus
#
# Without clang it says so and exits 0: the fuzzer is an extra, not a build requirement. A finding
# stops the run and leaves crash-*/timeout-* files in build-fuzz/artifacts/; copy the input to
# fuzz/regressions/ once it is fixed, so every later build replays it.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-smoke}
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ not found, skipping (scripts/install-deps.sh installs it)"
  exit 0
fi

cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOSSJIT_FUZZ=ON \
  -DLOSSJIT_BUILD_TESTS=OFF -DLOSSJIT_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_pipeline

root=$(pwd)
fuzzer=$root/build-fuzz/fuzz/fuzz_pipeline
mkdir -p build-fuzz/artifacts build-fuzz/corpus-work
common=(-dict="$root/fuzz/lossjit.dict" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$root/build-fuzz/artifacts/")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

case "$mode" in
  smoke)
    seconds=${2:-45}
    "$fuzzer" -runs=0 "${common[@]}" fuzz/regressions fuzz/corpus
    # Fuzz into a scratch copy so CI never changes the committed corpus.
    rm -rf build-fuzz/corpus-smoke && cp -r fuzz/corpus build-fuzz/corpus-smoke
    "$fuzzer" "${common[@]}" -max_total_time="$seconds" -print_final_stats=1 build-fuzz/corpus-smoke fuzz/regressions
    ;;
  run)
    seconds=${2:?how many seconds}
    workers=${3:-$(nproc)}
    # One long-lived process per worker (fork mode restarts its jobs and runs at half the speed);
    # entropic scheduling off, which nearly doubles executions per second on this target. Each
    # worker logs to build-fuzz/fuzz-N.log; a finding stops that worker only.
    rm -f build-fuzz/fuzz-*.log
    (cd build-fuzz && "$fuzzer" "${common[@]}" -entropic=0 -max_total_time="$seconds" -jobs="$workers" \
      -workers="$workers" -print_final_stats=1 corpus-work "$root/fuzz/corpus" "$root/fuzz/regressions")
    grep -h "^Done\|stat::number_of_executed_units" build-fuzz/fuzz-*.log || true
    ;;
  merge)
    rm -rf build-fuzz/corpus-merged && mkdir build-fuzz/corpus-merged
    "$fuzzer" "${common[@]}" -merge=1 build-fuzz/corpus-merged fuzz/corpus build-fuzz/corpus-work
    rm -rf fuzz/corpus && mv build-fuzz/corpus-merged fuzz/corpus
    ;;
  *)
    echo "usage: scripts/fuzz.sh smoke [SECONDS] | run SECONDS [WORKERS] | merge" >&2
    exit 2
    ;;
esac
