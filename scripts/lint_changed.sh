#!/usr/bin/env bash
# clang-tidy and cppcheck on the C++ files changed since BASE (committed, staged or not), with
# the release build's compile commands:
#   scripts/lint_changed.sh [BASE]     (default: the merge base of HEAD and main, or origin/main;
#                                       HEAD~1 when neither exists)
# clang-tidy uses the repository's .clang-tidy if there is one, else its default checks (the
# compiler's diagnostics and the clang static analyzer); cppcheck its warning, performance and
# portability checks, with scripts/lint/cppcheck_noreturn.h telling it that a failed KILN_CHECK
# (kiln::fail) does not return.
# Exits non-zero when either tool reports anything. A changed header is checked through the
# .cc of the same name (its own findings only).
set -euo pipefail
cd "$(dirname "$0")/.."
default_base() {
  local ref
  for ref in main origin/main; do
    if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
      git merge-base HEAD "$ref"
      return
    fi
  done
  git rev-parse HEAD~1
}
base=${1:-$(default_base)}
db=build/release/compile_commands.json
[ -f "$db" ] || { echo "lint: no $db; run scripts/build.sh release first" >&2; exit 2; }

mapfile -t changed < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.cc' '*.h' |
  while read -r f; do [ -f "$f" ] && echo "$f"; done)
if ((${#changed[@]} == 0)); then
  echo "lint: no C++ file changed since $base"
  exit 0
fi

# The translation units to analyze: every changed .cc the build compiles, and for a changed
# header the .cc beside it.
units=()
headers=()
for f in "${changed[@]}"; do
  case $f in
    *.h)
      headers+=("$f")
      f=${f%.h}.cc
      ;;
  esac
  [ -f "$f" ] && grep -q "\"file\": \"$PWD/$f\"" "$db" && units+=("$f")
done
mapfile -t units < <(printf '%s\n' "${units[@]}" | sort -u | sed '/^$/d')
echo "lint: ${#changed[@]} changed file(s) since $(git rev-parse --short "$base"), ${#units[@]} to analyze"
((${#units[@]})) || exit 0

status=0
# Findings in the changed headers count; in other headers they belong to other changes.
header_filter='^$'
if ((${#headers[@]})); then
  header_filter="($(printf '%s|' "${headers[@]}" | sed 's/[.]/[.]/g; s/|$//'))\$"
fi
tidy() {
  # (Its "N warnings generated." counts the ones from other headers it does not show.)
  clang-tidy -p build/release --quiet --warnings-as-errors='*' --header-filter="$header_filter" \
    "$@" 2> >(grep -v 'warnings\? generated\.$' >&2) || status=1
}
bench_units=() other_units=()
for u in "${units[@]}"; do
  if [[ $u == bench/* ]]; then bench_units+=("$u"); else other_units+=("$u"); fi
done
((${#other_units[@]} == 0)) || tidy "${other_units[@]}"
# Google Benchmark's `for (auto _ : state)` is a dead store to the analyzer.
((${#bench_units[@]} == 0)) || tidy --checks=-clang-analyzer-deadcode.DeadStores "${bench_units[@]}"

# missingReturn is left to the compiler (-Wreturn-type, an error in the release build): cppcheck
# reports it after every switch that ends in a [[noreturn]] member template such as a parser's
# fail(), which it cannot see through.
# (googletest: cppcheck's own description of the TEST macros; without it every test file is a
# syntax error, as cppcheck does not read system headers.)
cppcheck_args=(--project="$db" --include=scripts/lint/cppcheck_noreturn.h --library=googletest
  --enable=warning,performance,portability --inline-suppr --quiet
  --suppress=missingIncludeSystem --suppress=missingReturn -j "${KILN_JOBS:-$(nproc)}")
for u in "${units[@]}"; do cppcheck_args+=(--file-filter="$u"); done
# One line per finding, and only those in the changed files count (cppcheck also reports in the
# headers a file includes; those belong to other changes).
findings=$(cppcheck "${cppcheck_args[@]}" --error-exitcode=0 \
  --template='{file}:{line}:{column}: {severity}: {message} [{id}]' 2>&1 |
  grep -F -f <(printf '%s:\n' "${changed[@]}") || true)
if [ -n "$findings" ]; then
  echo "$findings" >&2
  status=1
fi

((status == 0)) && echo "lint: clean" || echo "lint: findings above" >&2
exit "$status"
