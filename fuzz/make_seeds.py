"""Writes the binary and generated seeds of fuzz/corpus (the JSON requests there are written by
hand): tiny GGUF models whose metadata reaches the model-config and tokenizer readers,
safetensors files of each supported dtype, and a byte-level tokenizer.json. Each stays a few KB.

Run from the repository root: .venv/bin/python3 fuzz/make_seeds.py
"""
import json
import pathlib
import struct

import numpy as np
from gguf import GGUFWriter

CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def byte_chars():
    """GPT-2's byte -> printable character table (every byte-level vocab holds all 256)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def gguf_model(path, tokenizer, block_count=1):
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(block_count)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    if tokenizer == "llama":
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(8)] + ["\u2581", "a", "b", "\u2581a", "ab"]
        types = [2, 3, 3] + [6] * 8 + [1] * 5
        w.add_tokenizer_model("llama")
        w.add_token_scores([0.0] * 11 + [-1.0, -2.0, -3.0, -0.5, -0.7])
    else:
        tokens = byte_chars() + ["ab", "<|end|>"]
        types = [1] * 257 + [3]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("llama-bpe")
        w.add_token_merges(["a b"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    w.add_tensor("token_embd.weight", np.arange(len(tokens) * 8 if tokenizer == "llama" else 16 * 8, dtype=np.float32).reshape(-1, 8) / 100)
    w.add_tensor("output_norm.weight", np.ones(8, dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        nbytes = int(np.prod(shape, dtype=np.int64)) * {"F32": 4, "F16": 2, "BF16": 2}[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + nbytes]}
        data += bytes((i * 37) & 255 for i in range(nbytes))
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def byte_level_tokenizer():
    vocab = {c: i for i, c in enumerate(byte_chars())}
    vocab["ab"] = 256
    return {
        "added_tokens": [{"id": 257, "content": "<|end|>", "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "vocab": vocab, "merges": [["a", "b"]]},
        "fuzz_tokenizer_config": {"bos_token": "<|end|>", "chat_template": "{{ messages }}"},
        "fuzz_generation_config": {"eos_token_id": [257]},
    }


def chat_template_seed(template):
    """The template as chat_template_fuzzer's FuzzedDataProvider reads it back: backslashes
    doubled, a backslash + other byte ending the string, then bytes for roles and contents
    (integers are taken from the end of the input)."""
    text = template.replace(b"\\", b"\\\\") + b"\\|"
    return text + b"system prompt\\|hello\\|hi there\\|how are you?\\|" + bytes([1, 0, 2, 1, 4])


def json_constraint_seed(schema, generated):
    """A json_constraint input: the schema, a NUL, then the bytes a model might generate."""
    return json.dumps(schema, ensure_ascii=False).encode() + b"\0" + generated.encode()


def json_constraint_seeds():
    """Patterns at the compile limits (docs/json-schema.md, "Limits"): nesting past 128 groups
    (10,000 overflowed the stack), and counted repetitions whose compile took ~10^9 steps
    before the work budget."""
    def string(pattern, **extra):
        return {"type": "string", "pattern": pattern, **extra}

    seeds = {
        "regress_nested_groups_129": (string("(" * 129 + "a" + ")" * 129), '"a"'),
        "regress_nested_groups_10000": (string("(" * 10000 + "a" + ")" * 10000), '"a"'),
        "nested_groups_128": (string("^" + "(?:" * 128 + "a" + ")" * 128 + "+$"), '"aa"'),
        "regress_pattern_a_max_length_30000": (string("a", maxLength=30000), '"ba"'),
        "regress_class_0_1000_max_length_30000": (string("[^<>]{0,1000}", maxLength=30000), '"x<"'),
        "regress_counted_nested": (string("(a{1000}){1000}"), '"a"'),
        "regress_counted_95000_states": (string("^(a{1000}){95}$"), '"aaa"'),
        "regress_counted_runs": (string("".join(c + "{1000}" for c in "abcdefghij")), '"ab"'),
        "regress_alternatives_300": (string("|".join(chr(0x4E00 + i) for i in range(300))), '"x"'),
        "nested_quantifiers": (string("^((a|b)*c?(d+e*)*){100}f{0,1000}$", minLength=2), '"abc'),
    }
    for name, (schema, generated) in seeds.items():
        write("json_constraint", name, json_constraint_seed(schema, generated))


def deep_request_seeds():
    """Requests nested far past the 128-level input limit through the fields that reach a
    recursive walk (a 60 kB chat request nested 30,000 deep used to overflow the server's
    stack): the body itself, a tool call's arguments string, a tool's unknown member, and
    SGLang's json_schema string."""
    deep = "[" * 30000 + "]" * 30000
    ask = [{"role": "user", "content": "Hi"}]
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": deep}}
    write("openai_chat", "regress_deep_arguments_30000.json", json.dumps(
        {"messages": ask + [{"role": "assistant", "tool_calls": [call]}], "tools": [tool]}))
    write("openai_chat", "regress_deep_body_30000.json",
          '{"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", '
          '"function": {"name": "f", "x": ' + deep + "}}]}")
    write("openai_chat", "nested_arguments_127.json", json.dumps(
        {"messages": ask + [{"role": "assistant", "tool_calls": [
            {**call, "function": {"name": "f", "arguments": "[" * 127 + "]" * 127}}]}],
         "tools": [tool]}))
    write("native_generate", "regress_deep_json_schema_30000.json",
          json.dumps({"text": "a", "sampling_params": {"json_schema": deep}}))


def main():
    json_constraint_seeds()
    deep_request_seeds()
    templates = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "chat_templates"
    for t in sorted(templates.glob("*.jinja")):
        if t.stat().st_size <= 5000:  # seeds stay small; the larger ones add no new format
            write("chat_template", t.stem + ".bin", chat_template_seed(t.read_bytes()))
    for kind in ("llama", "gpt2"):
        path = CORPUS / "gguf" / f"tiny_{kind}.gguf"
        path.parent.mkdir(parents=True, exist_ok=True)
        gguf_model(path, kind)
    # Inputs of fixed findings (docs/fuzzing.md), replayed by every run.
    gguf_model(CORPUS / "gguf" / "regress_block_count_2e9.gguf", "llama", block_count=2000000000)
    llama_config = json.loads((CORPUS / "hf_config" / "llama.json").read_text())
    write("hf_config", "regress_layers_2e9.json", json.dumps({**llama_config, "num_hidden_layers": 2000000000}))
    write("hf_config", "regress_partial_rotary_1e300.json", json.dumps({**llama_config, "partial_rotary_factor": 1e300}))
    tok = byte_level_tokenizer()
    tok["pre_tokenizer"]["add_prefix_space"] = "no"
    write("hf_tokenizer", "regress_wrong_type.json", json.dumps(tok, ensure_ascii=False))
    tok = byte_level_tokenizer()
    tok["added_tokens"][0]["id"] = -1
    write("hf_tokenizer", "regress_added_id_minus_1.json", json.dumps(tok, ensure_ascii=False))
    write("safetensors", "three_dtypes.safetensors",
          safetensors([("model.embed_tokens.weight", "F32", [4, 3]), ("model.norm.weight", "F16", [3]),
                       ("lm_head.weight", "BF16", [2, 2])], {"format": "pt"}))
    write("safetensors", "scalar_and_empty.safetensors", safetensors([("s", "F32", []), ("e", "F16", [0, 4])]))
    write("safetensors", "no_tensors.safetensors", safetensors([]))
    write("hf_tokenizer", "byte_level.json", json.dumps(byte_level_tokenizer(), ensure_ascii=False))


if __name__ == "__main__":
    main()
