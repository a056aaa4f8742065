#!/usr/bin/env bash
# Soak test of `kiln serve` (bench/soak.py): mixed normal and hostile traffic for a bounded time
# (default 30 minutes), then checks KV pages, threads, fds, RSS flatness and a greedy probe.
# Usage: bench/soak.sh [--minutes M] [--model PATH] [other soak.py options]
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python3 bench/soak.py "$@"
