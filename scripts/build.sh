#!/usr/bin/env bash
# Configures and builds one preset (default: release) with Ninja and ccache.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
# ccache keys on paths relative to the checkout, so a clone in another folder (CI's) reuses
# what any earlier build compiled; without -g in the flags the build folder is not hashed.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "${KILN_JOBS:-$(nproc)}"
