"""Adds to each oracle case's Hugging Face directory what kiln's HF loader is tested with and
make_hf_goldens.py does not write itself:

  hf/tokenizer.json        the fast (`tokenizers`) form of hf/tokenizer.model, converted by
                           transformers' LlamaTokenizer (the class tokenizer_config.json names)
  llama/hf-bf16/           the llama checkpoint with every tensor rounded to bfloat16
  qwen3moe/hf-sharded/     the qwen3moe checkpoint split into two shards with
                           model.safetensors.index.json (experts of one layer span both)
  gpt-oss/hf-mxfp4/        the gpt-oss checkpoint with its experts in MXFP4 blocks and scales,
                           as OpenAI publishes gpt-oss (quantization_config mxfp4); its
                           conversion by convert_hf_to_gguf.py is gpt-oss/model.mxfp4.gguf

The variant directories copy the JSON and tokenizer files of hf/. make_hf_goldens.py calls
this for every case it builds; run it alone (in the oracle venv) to refresh only these files:

    .venv-oracle/bin/python3 tests/oracle/make_hf_variants.py
"""
import json
import pathlib
import shutil
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "data"
BF16_CASES = ("llama",)
SHARDED_CASES = ("qwen3moe",)
MXFP4_CASES = ("gpt-oss",)
# The FP4 (e2m1) values of the 16 codes, as transformers' integrations/mxfp4.py lists them.
FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
SIDE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")


def write_tokenizer_json(hf: pathlib.Path) -> None:
    import transformers

    # The class tokenizer_config.json names for every case (AutoTokenizer would pick a
    # different converter per model_type: one keeps sentencepiece's precompiled normalizer,
    # which kiln refuses, and the Qwen one re-reads the pieces as byte-level BPE).
    tok = transformers.LlamaTokenizer.from_pretrained(str(hf))
    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        shutil.copy(pathlib.Path(tmp) / "tokenizer.json", hf / "tokenizer.json")


def copy_side_files(src: pathlib.Path, dst: pathlib.Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir()
    for name in SIDE_FILES:
        if (src / name).exists():
            shutil.copy(src / name, dst / name)


def write_bf16(src: pathlib.Path, dst: pathlib.Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    copy_side_files(src, dst)
    tensors = {k: v.to(torch.bfloat16) for k, v in load_file(src / "model.safetensors").items()}
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((dst / "config.json").read_text())
    config["dtype"] = "bfloat16"
    (dst / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def write_sharded(src: pathlib.Path, dst: pathlib.Path, shards: int = 2) -> None:
    from safetensors.numpy import load_file, save_file

    copy_side_files(src, dst)
    tensors = load_file(src / "model.safetensors")
    names = sorted(tensors)
    per = (len(names) + shards - 1) // shards
    weight_map, total = {}, 0
    for s in range(shards):
        part = names[s * per:(s + 1) * per]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        save_file({n: tensors[n] for n in part}, dst / fname, metadata={"format": "pt"})
        for n in part:
            weight_map[n] = fname
            total += tensors[n].nbytes
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (dst / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def mxfp4_blocks(w):
    """w [experts, out, in] (numpy float) as MXFP4 blocks [experts, out, in/32, 16] (two codes a
    byte, the even element in the low nibble) and e8m0 scales [experts, out, in/32]: each block
    of 32 inputs scaled by the power of two that brings its largest magnitude to at most 6, each
    value rounded to the nearest FP4 value."""
    import numpy as np

    e, o, i = w.shape
    blk = w.reshape(e, o, i // 32, 32).astype(np.float64)
    amax = np.abs(blk).max(axis=-1)
    exp = np.where(amax > 0, np.ceil(np.log2(np.maximum(amax, 1e-30) / 6.0)), 0).astype(np.int64)
    scaled = blk / np.ldexp(1.0, exp)[..., None]
    values = np.array(FP4_VALUES[:8])
    mag = np.abs(scaled)[..., None]
    codes = np.abs(mag - values).argmin(axis=-1) + np.where(scaled < 0, 8, 0)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return packed, (exp + 127).astype(np.uint8)


def mxfp4_values(blocks, scales):
    """The float values of MXFP4 blocks [..., nb, 16] and scales [..., nb]: [..., nb * 32], as
    transformers' convert_moe_packed_tensors dequantizes them."""
    import numpy as np

    lut = np.array(FP4_VALUES)
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    vals = lut[codes] * np.ldexp(1.0, scales.astype(np.int64) - 127)[..., None]
    return vals.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


def write_mxfp4(src: pathlib.Path, dst: pathlib.Path) -> None:
    import numpy as np
    from safetensors.numpy import load_file, save_file

    copy_side_files(src, dst)
    shutil.copy(src / "tokenizer.model", dst / "tokenizer.model")  # the converter reads it
    tensors = load_file(src / "model.safetensors")
    out = {}
    for name, t in tensors.items():
        if name.endswith("mlp.experts.gate_up_proj") or name.endswith("mlp.experts.down_proj"):
            # Stored [experts, in, out]; the blocks run along the inputs of each output row.
            blocks, scales = mxfp4_blocks(np.ascontiguousarray(t.transpose(0, 2, 1)))
            out[name + "_blocks"] = blocks
            out[name + "_scales"] = scales
        else:
            out[name] = t
    save_file(out, dst / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((dst / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                   "model.embed_tokens", "lm_head"]}
    (dst / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def build(case_dir: pathlib.Path) -> None:
    hf = case_dir / "hf"
    write_tokenizer_json(hf)
    if case_dir.name in BF16_CASES:
        write_bf16(hf, case_dir / "hf-bf16")
    if case_dir.name in SHARDED_CASES:
        write_sharded(hf, case_dir / "hf-sharded")
    if case_dir.name in MXFP4_CASES:
        write_mxfp4(hf, case_dir / "hf-mxfp4")


def main() -> None:
    import make_hf_goldens

    for case_dir in sorted(p for p in DATA.iterdir() if p.is_dir()):
        build(case_dir)
        print(f"{case_dir.name}: tokenizer.json" + (", hf-bf16" if case_dir.name in BF16_CASES else "")
              + (", hf-sharded" if case_dir.name in SHARDED_CASES else ""))
    make_hf_goldens.write_checksums()


if __name__ == "__main__":
    main()
