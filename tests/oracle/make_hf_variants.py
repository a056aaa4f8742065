"""Adds to each oracle case's Hugging Face directory what kiln's HF loader is tested with and
make_hf_goldens.py does not write itself:

  hf/tokenizer.json        the fast (`tokenizers`) form of hf/tokenizer.model, converted by
                           transformers' LlamaTokenizer (the class tokenizer_config.json names)
  llama/hf-bf16/           the llama checkpoint with every tensor rounded to bfloat16
  qwen3moe/hf-sharded/     the qwen3moe checkpoint split into two shards with
                           model.safetensors.index.json (experts of one layer span both)

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


def build(case_dir: pathlib.Path) -> None:
    hf = case_dir / "hf"
    write_tokenizer_json(hf)
    if case_dir.name in BF16_CASES:
        write_bf16(hf, case_dir / "hf-bf16")
    if case_dir.name in SHARDED_CASES:
        write_sharded(hf, case_dir / "hf-sharded")


def main() -> None:
    import make_hf_goldens

    for case_dir in sorted(p for p in DATA.iterdir() if p.is_dir()):
        build(case_dir)
        print(f"{case_dir.name}: tokenizer.json" + (", hf-bf16" if case_dir.name in BF16_CASES else "")
              + (", hf-sharded" if case_dir.name in SHARDED_CASES else ""))
    make_hf_goldens.write_checksums()


if __name__ == "__main__":
    main()
