"""Broken Hugging Face model directories: `kiln run -m DIR` fails with one clear error line
(and a non-zero exit) naming the problem, never a crash or a wrong model. Each directory is a
copy of an oracle fixture (tests/oracle/data/llama/hf) with one thing broken."""
import json
import os
import pathlib
import shutil
import struct
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "oracle" / "data" / "llama" / "hf"
SHARDED = ROOT / "tests" / "oracle" / "data" / "qwen3moe" / "hf-sharded"
KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "release" / "kiln"))


def run_kiln(model_dir):
    return subprocess.run([KILN, "run", "-m", str(model_dir), "-p", "hi", "-n", "2", "-t", "1",
                           "--graph-mode", "off"], capture_output=True, text=True, timeout=120)


def assert_one_error_line(proc, *needles):
    assert proc.returncode != 0, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kiln: error: "), lines[0]
    for n in needles:
        assert n in lines[0], lines[0]


def copy_of(tmp_path, src=GOOD):
    dst = tmp_path / "model"
    shutil.copytree(src, dst)
    return dst


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_safetensors(path, header, data):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def edit_config(d, **changes):
    config = json.loads((d / "config.json").read_text())
    config.update(changes)
    (d / "config.json").write_text(json.dumps(config))


def test_good_directory_runs(tmp_path):
    proc = run_kiln(GOOD)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name,needle", [
    ("config.json", "has no config.json"),
    ("tokenizer.json", "has no tokenizer.json"),
    ("model.safetensors", "has no *.safetensors weights"),
])
def test_missing_file(tmp_path, name, needle):
    d = copy_of(tmp_path)
    (d / name).unlink()
    assert_one_error_line(run_kiln(d), needle)


def test_unknown_architecture(tmp_path):
    d = copy_of(tmp_path)
    edit_config(d, architectures=["GPTNeoXForCausalLM"], model_type="gpt_neox")
    assert_one_error_line(run_kiln(d), "unsupported architecture 'GPTNeoXForCausalLM'")


def test_unsupported_rope_scaling(tmp_path):
    d = copy_of(tmp_path)
    edit_config(d, rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0})
    assert_one_error_line(run_kiln(d), "rope scaling 'yarn' is not implemented")


def test_unsupported_dtype(tmp_path):
    d = copy_of(tmp_path)
    header, data = read_safetensors(d / "model.safetensors")
    header["position_ids"] = {"dtype": "I64", "shape": [2], "data_offsets": [len(data), len(data) + 16]}
    write_safetensors(d / "model.safetensors", header, data + bytes(16))
    assert_one_error_line(run_kiln(d), "unsupported dtype 'I64'", "position_ids")


def test_shape_mismatch(tmp_path):
    d = copy_of(tmp_path)
    edit_config(d, num_key_value_heads=4)  # k_proj/v_proj hold 2 heads
    assert_one_error_line(run_kiln(d), "model.layers.0.self_attn.k_proj.weight", "has shape [32,64]",
                          "config.json implies [64,64]")


def test_size_mismatch_in_header(tmp_path):
    d = copy_of(tmp_path)
    header, data = read_safetensors(d / "model.safetensors")
    header["model.norm.weight"]["shape"] = [65]
    write_safetensors(d / "model.safetensors", header, data)
    assert_one_error_line(run_kiln(d), "model.norm.weight", "needs 260")


def test_truncated_header(tmp_path):
    d = copy_of(tmp_path)
    raw = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(raw[:100])
    assert_one_error_line(run_kiln(d), "header length", "runs past the end of the file")


def test_missing_tensor(tmp_path):
    d = copy_of(tmp_path)
    header, data = read_safetensors(d / "model.safetensors")
    del header["model.layers.1.mlp.up_proj.weight"]
    write_safetensors(d / "model.safetensors", header, data)
    assert_one_error_line(run_kiln(d), "no tensor 'model.layers.1.mlp.up_proj.weight'")


def test_missing_shard(tmp_path):
    d = copy_of(tmp_path, SHARDED)
    (d / "model-00002-of-00002.safetensors").unlink()
    assert_one_error_line(run_kiln(d), "lists shard 'model-00002-of-00002.safetensors'", "missing")


def test_unsupported_normalizer(tmp_path):
    d = copy_of(tmp_path)
    tok = json.loads((d / "tokenizer.json").read_text())
    tok["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": "AAAA"}
    (d / "tokenizer.json").write_text(json.dumps(tok))
    assert_one_error_line(run_kiln(d), "normalizer 'Precompiled' is not supported")


def test_unsupported_tokenizer_model(tmp_path):
    d = copy_of(tmp_path)
    tok = json.loads((d / "tokenizer.json").read_text())
    tok["model"]["type"] = "WordPiece"
    (d / "tokenizer.json").write_text(json.dumps(tok))
    assert_one_error_line(run_kiln(d), "model type 'WordPiece' is not supported")


def test_more_embedding_rows_than_tokens(tmp_path):
    """Embedding rows past the tokenizer (padding, as in Qwen checkpoints) get unused [PAD]
    tokens: the model loads, its logits have every row, and a sampled padding id decodes."""
    import numpy as np

    d = copy_of(tmp_path)
    header, data = read_safetensors(d / "model.safetensors")
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(info["shape"])
    rows = 400
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        t = tensors[name]
        extra = np.zeros((rows - t.shape[0], t.shape[1]), dtype="<f4")
        if name == "lm_head.weight":
            extra[:] = 10.0  # the padding rows win every argmax
        tensors[name] = np.concatenate([t, extra])
    new_header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        raw = np.ascontiguousarray(t).tobytes()
        new_header[name] = {"dtype": "F32", "shape": list(t.shape),
                            "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    write_safetensors(d / "model.safetensors", new_header, b"".join(chunks))
    edit_config(d, vocab_size=rows)
    proc = subprocess.run([KILN, "run", "-m", str(d), "-p", "hi", "-n", "3", "-t", "1",
                           "--graph-mode", "off"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ids = tmp_path / "ids.txt"
    ids.write_text("1 5 399")
    out = tmp_path / "logits.f32"
    proc = subprocess.run([KILN, "logits", "-m", str(d), "--ids", str(ids), "-o", str(out), "-t", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["vocab"] == rows


def test_gpt_oss_mxfp4_blocks_without_scales(tmp_path):
    # OpenAI's checkpoints keep the experts as MXFP4 blocks and scales; blocks alone are named.
    d = copy_of(tmp_path, ROOT / "tests" / "oracle" / "data" / "gpt-oss" / "hf-mxfp4")
    header, data = read_safetensors(d / "model.safetensors")
    del header["model.layers.0.mlp.experts.gate_up_proj_scales"]
    write_safetensors(d / "model.safetensors", header, data)
    assert_one_error_line(run_kiln(d), "no tensor 'model.layers.0.mlp.experts.gate_up_proj_scales'")


def test_gpt_oss_mxfp4_blocks_of_the_wrong_shape(tmp_path):
    d = copy_of(tmp_path, ROOT / "tests" / "oracle" / "data" / "gpt-oss" / "hf-mxfp4")
    header, data = read_safetensors(d / "model.safetensors")
    info = header["model.layers.1.mlp.experts.down_proj_blocks"]
    e, rows, nb, width = info["shape"]
    info["shape"] = [e, rows, nb * 2, width // 2]  # the same bytes, 8 a block
    write_safetensors(d / "model.safetensors", header, data)
    assert_one_error_line(run_kiln(d), "MXFP4 tensors", "down_proj_blocks")
