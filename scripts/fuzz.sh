#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan + UBSan) in build-fuzz/ (or $LOSSJIT_FUZZ_BUILD) and runs it.
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
bdir=${LOSSJIT_FUZZ_BUILD:-build-fuzz}  # build folder, relative to the source tree
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ not found, skipping (scripts/install-deps.sh installs it)"
  exit 0
fi

cmake -S . -B "$bdir" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOSSJIT_FUZZ=ON \
  -DLOSSJIT_BUILD_TESTS=OFF -DLOSSJIT_BUILD_BENCH=OFF >/dev/null
cmake --build "$bdir" -j"$(nproc)" --target fuzz_pipeline

root=$(pwd)
fuzzer=$root/$bdir/fuzz/fuzz_pipeline
mkdir -p "$bdir"/artifacts "$bdir"/corpus-work
common=(-dict="$root/fuzz/lossjit.dict" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$root/$bdir/artifacts/")
# Extra libFuzzer flags; later ones win, e.g. LOSSJIT_FUZZ_FLAGS="-max_len=768" for more executions/s.
read -r -a extra <<<"${LOSSJIT_FUZZ_FLAGS:-}"
common+=("${extra[@]}")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

case "$mode" in
  smoke)
    seconds=${2:-45}
    "$fuzzer" -runs=0 "${common[@]}" fuzz/regressions fuzz/corpus
    # Fuzz into a scratch copy so CI never changes the committed corpus.
    rm -rf "$bdir"/corpus-smoke && cp -r fuzz/corpus "$bdir"/corpus-smoke
    "$fuzzer" "${common[@]}" -max_total_time="$seconds" -print_final_stats=1 "$bdir"/corpus-smoke fuzz/regressions
    ;;
  run)
    seconds=${2:?how many seconds}
    workers=${3:-$(nproc)}
    # One long-lived process per worker (fork mode restarts its jobs and runs at half the speed);
    # entropic scheduling off, which nearly doubles executions per second on this target. Each
    # worker logs to build-fuzz/fuzz-N.log; a finding stops that worker only.
    rm -f "$bdir"/fuzz-*.log
    (cd "$bdir" && "$fuzzer" "${common[@]}" -entropic=0 -max_total_time="$seconds" -jobs="$workers" \
      -workers="$workers" -print_final_stats=1 corpus-work "$root/fuzz/corpus" "$root/fuzz/regressions")
    grep -h "^Done\|stat::number_of_executed_units" "$bdir"/fuzz-*.log || true
    ;;
  merge)
    rm -rf "$bdir"/corpus-merged && mkdir "$bdir"/corpus-merged
    "$fuzzer" "${common[@]}" -merge=1 "$bdir"/corpus-merged fuzz/corpus "$bdir"/corpus-work
    # The seeds (examples and documentation snippets) stay, readable, whatever the merge keeps.
    cp fuzz/corpus/seed-* "$bdir"/corpus-merged/
    rm -rf fuzz/corpus && mv "$bdir"/corpus-merged fuzz/corpus
    ;;
  *)
    echo "usage: scripts/fuzz.sh smoke [SECONDS] | run SECONDS [WORKERS] | merge" >&2
    exit 2
    ;;
esac
