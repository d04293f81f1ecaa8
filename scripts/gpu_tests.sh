#!/usr/bin/env bash
# The C++ GPU suite (lossjit_tests --test-suite=gpu) in several processes at once on one GPU. Its
# cases compile hundreds of kernels with NVRTC on the CPU: in one process, beside other work on an
# H200, the cases' durations summed to about 18 minutes (the longest 215 s), past a device call's
# 10 (stop 78 ran 51 of the 57 over four calls). Case k of the suite's own listing goes to process
# k mod P, each with a kernel cache of its own; every process's summary is printed, its log kept.
#
#   scripts/gpu_tests.sh [BUILD] [PROCESSES] [PATTERN]
#
# BUILD: the build folder (build); PROCESSES: how many at once (6); PATTERN: an extended regular
# expression: only the cases whose names match it (all). Logs go to $GPU_TESTS_LOGS (a new
# temporary folder). Exit status 0 when every process passed, 77 when there is no GPU (the suite
# lists no case), else 1.
set -uo pipefail
build=${1:-build}
processes=${2:-6}
pattern=${3:-}
tests=$build/tests/lossjit_tests
[[ -x $tests ]] || { echo "gpu_tests.sh: no $tests (cmake --build $build)" >&2; exit 2; }
[[ $processes =~ ^[1-9][0-9]*$ ]] || { echo "gpu_tests.sh: PROCESSES is a positive number, not $processes" >&2; exit 2; }
export LOSSJIT_SOURCE_DIR=${LOSSJIT_SOURCE_DIR:-$PWD}
logs=${GPU_TESTS_LOGS:-$(mktemp -d)}
mkdir -p "$logs"

# The listing: the names between doctest's two rules (none where the GPU tests skip).
mapfile -t cases < <("$tests" --test-suite=gpu --list-test-cases --no-version 2>/dev/null |
                     sed -n '/^=====/,/^=====/p' | grep -v '^=====')
if [[ -n $pattern ]]; then
  mapfile -t cases < <(printf '%s\n' "${cases[@]}" | grep -E -- "$pattern")
fi
if ((${#cases[@]} == 0)); then
  "$tests" --test-suite=gpu --list-test-cases --no-version 2>&1 | grep -m1 SKIPPED >&2
  echo "gpu_tests.sh: no GPU test case to run${pattern:+ (matching $pattern)}" >&2
  exit 77
fi
((processes > ${#cases[@]})) && processes=${#cases[@]}

# doctest splits a filter at commas and reads * and ? as wildcards: a comma in a name becomes ?.
filters=()
for ((k = 0; k < ${#cases[@]}; ++k)); do
  p=$((k % processes))
  filters[p]+="${filters[p]:+,}${cases[k]//,/?}"
done
pids=()
for ((p = 0; p < processes; ++p)); do
  LOSSJIT_CACHE_DIR=${LOSSJIT_CACHE_DIR:-$logs/cache}.$p \
    "$tests" --test-suite=gpu --test-case="${filters[p]}" --duration=true > "$logs/process$p.txt" 2>&1 &
  pids[p]=$!
done
failed=0
for ((p = 0; p < processes; ++p)); do
  wait "${pids[p]}"
  status=$?
  ((status != 0)) && failed=1
  echo "== process $p (exit $status): $(grep -c '' <<< "${filters[p]//,/$'\n'}") cases"
  grep -E 'ERROR|FATAL' "$logs/process$p.txt" | head -n 10  # (the log has all)
  grep -E '^\[doctest\] (test cases|assertions)' "$logs/process$p.txt"
done
echo "gpu_tests.sh: ${#cases[@]} cases in $processes processes; logs in $logs"
exit $failed
