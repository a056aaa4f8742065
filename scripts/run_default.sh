#!/usr/bin/env bash
# One command on a fresh machine: install everything, build, and run kiln on the default model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
exec build/release/kiln run -p "${1:-The capital of France is}" -n "${2:-64}"
