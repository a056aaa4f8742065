#!/usr/bin/env bash
# C++ unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (the `sanitize` preset: GCC,
# -O1, build/sanitize). Any sanitizer report fails: UB aborts (-fno-sanitize-recover=all), ASan
# and UBSan halt on the first error, LeakSanitizer reports leaks at exit; each makes a test
# binary exit non-zero, and this script with it.
#   scripts/sanitize.sh          the CI subset (below)
#   scripts/sanitize.sh all      every unit-test binary, whole
#
# The CI subset: kiln_base_tests, kiln_model_tests and kiln_server_tests whole (file readers,
# tokenizers, chat templates, the HTTP server and request parsers: where untrusted bytes go),
# and from kiln_engine_tests the suites of tests/engine/json (the JSON-schema compiler and
# matcher). The kernels, graph and the rest of the engine tests run the same arithmetic many
# times over tiny models: under ASan they cost the most time for the least new coverage, and
# the fuzz targets (scripts/fuzz.sh, clang ASan+UBSan) already cover the parsers again.
# docs/development.md has the measured times.
set -euo pipefail
cd "$(dirname "$0")/.."
scope=${1:-ci}

binaries=(kiln_base_tests kiln_model_tests kiln_server_tests kiln_engine_tests)
[ "$scope" = all ] && binaries+=(kiln_kernels_tests kiln_graph_tests)

# As scripts/build.sh: cache hits across checkouts (-g1 would otherwise hash the build folder).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "${KILN_JOBS:-$(nproc)}" --target "${binaries[@]}"

testdata=build/sanitize/testdata
.venv/bin/python3 tests/fixtures/generate_all.py "$testdata"
export KILN_TESTDATA="$PWD/$testdata"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# The suites of tests/engine/json, read from the sources so a new test file there is included.
json_filter=$(grep -ho '^TEST[_FP]*([A-Za-z0-9_]*' tests/engine/json/*.cc | sed 's/.*(//' |
  sort -u | sed 's/$/.*/' | paste -sd: -)

failed=()
for bin in "${binaries[@]}"; do
  filter='*'
  [ "$scope" != all ] && [ "$bin" = kiln_engine_tests ] && filter=$json_filter
  log=build/sanitize/logs/$bin.log
  mkdir -p "$(dirname "$log")"
  start=$SECONDS
  status=ok
  build/sanitize/tests/"$bin" --gtest_filter="$filter" --gtest_brief=1 >"$log" 2>&1 || status=FAILED
  printf '%-20s %5ss %s\n' "$bin" $((SECONDS - start)) "$status"
  if [ "$status" != ok ]; then
    failed+=("$bin")
    grep -E "ERROR: (Address|Leak)Sanitizer|runtime error|SUMMARY|FAILED" "$log" | head -12 >&2 || true
    echo "sanitize: $bin failed; full log: $log" >&2
  fi
done
if ((${#failed[@]})); then
  echo "sanitize: failures in: ${failed[*]}" >&2
  exit 1
fi
