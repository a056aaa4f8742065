#!/usr/bin/env bash
# Creates .venv-oracle: torch (CPU use only), transformers and the converter's dependencies, for
# the hand-run generators that use Hugging Face transformers as the oracle
# (tests/oracle/make_hf_goldens.py, bench/default_model_vs_transformers.py). Several GB; CI
# never needs it: the generators' outputs are committed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv-oracle/bin/python3 ] || "$PY" -m venv .venv-oracle
.venv-oracle/bin/python3 -m pip install -q --upgrade pip >/dev/null
.venv-oracle/bin/python3 -m pip install -q torch transformers safetensors sentencepiece protobuf \
  numpy "gguf==0.19.0" jinja2 accelerate
.venv-oracle/bin/python3 -c 'import torch, transformers; print("oracle venv: torch", torch.__version__, "transformers", transformers.__version__)'
