#!/usr/bin/env bash
# Every pre-tokenizer type kiln runs against llama.cpp's own tokenizer (libllama), on copies of
# llama.cpp's test-set vocabularies with tokenizer.ggml.pre set to each name: see
# bench/tokenizer_pretypes_vs_llama_cpp.py. Builds llama.cpp (bench/llama_cpp_build.sh, ~8
# minutes on 2 cores the first time) and kiln's release build if missing.
# Usage: bench/tokenizer_pretypes_vs_llama_cpp.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/llama_cpp_build.sh
[[ -x build/release/kiln ]] || scripts/build.sh release
logdir=build/bench-logs/tokenizer_pretypes
bin=$(llama_cpp_bin_dir "$logdir" llama-simple)
src=$(scripts/fetch_llama_cpp_src.sh)
tool=build/llama-cpp-ref/llama_vocab_tokenize
c++ -O1 -std=c++17 bench/llama_vocab_tokenize.cpp -I"$src/include" -I"$src/ggml/include" \
  -L"$bin" -lllama -Wl,-rpath,"$bin" -o "$tool"
.venv/bin/python3 bench/tokenizer_pretypes_vs_llama_cpp.py --kiln build/release/kiln \
  --llama-tokenize "$tool" --models "$src/models"
