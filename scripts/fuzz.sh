#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan + UBSan, in build/fuzz) and runs each for
# a bounded time from its committed seed corpus:
#   scripts/fuzz.sh [seconds-per-target] [target...]     (default: 60 s, every target)
# New inputs the fuzzer finds go to build/fuzz/work/<target> (the committed corpus is only read);
# a crash, sanitizer report, unexpected exception, timeout or memory blow-up writes its input to
# build/fuzz/artifacts/<target>/ and makes the script exit non-zero after the other targets ran.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true

# The build's output goes to a log; on failure its last lines say why (a silent exit 1 here once
# hid a link error from CI's log).
mkdir -p build/fuzz/logs
build_log=build/fuzz/logs/build.log
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if ! { CC=clang CXX=clang++ cmake --preset fuzz &&
  cmake --build --preset fuzz -j "${KILN_JOBS:-$(nproc)}"; } >"$build_log" 2>&1; then
  grep -E "error|FAILED" "$build_log" | head -20 >&2 || tail -20 "$build_log" >&2
  echo "fuzz: building the fuzz targets failed; full log: $build_log" >&2
  exit 1
fi

all_targets=(native_generate openai_completion openai_chat sampling_params gguf safetensors
  hf_config hf_tokenizer ir_parser chat_template json_constraint grammar_constraint tool_call_parser)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")

dict_for() {
  case $1 in
    native_generate | openai_completion | openai_chat | sampling_params) echo requests ;;
    hf_config | hf_tokenizer) echo hf ;;
    *) echo "$1" ;;
  esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
printf '%-18s %12s %9s %s\n' target execs exec/s result
for t in "${targets[@]}"; do
  bin=build/fuzz/fuzz/${t}_fuzzer
  [ -x "$bin" ] || { echo "fuzz: no target '$t' (one of: ${all_targets[*]})" >&2; exit 2; }
  work=build/fuzz/work/$t
  artifacts=build/fuzz/artifacts/$t
  log=build/fuzz/logs/$t.log
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  dict=fuzz/dict/$(dict_for "$t").dict
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048
    -print_final_stats=1 -print_funcs=0 -artifact_prefix="$artifacts/")
  [ -f "$dict" ] && args+=(-dict="$dict")
  status=ok
  "$bin" "${args[@]}" "$work" "fuzz/corpus/$t" >"$log" 2>&1 || status=FAILED
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  printf '%-18s %12s %9s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$status"
  if [ "$status" != ok ]; then
    failed+=("$t")
    grep -E "ERROR|runtime error|terminate|SUMMARY|Test unit written" "$log" | head -8 >&2 || true
    echo "fuzz: $t failed; full log: $log" >&2
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: failures in: ${failed[*]}" >&2
  exit 1
fi
