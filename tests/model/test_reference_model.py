"""Checks the numpy reference model (tests/fixtures/reference_model.py) and the tiny test models
against things that do not share its code: gguf's own reader and dequantizers, a plain
per-token / per-head loop implementation written here, and properties RoPE, the sliding window
and the f16 KV cache must have. kiln's logits are compared with the reference's by C++ tests;
these tests make sure the reference itself deserves that trust."""
import dataclasses
import json
import math
import pathlib
import sys

import numpy as np
import pytest

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))

import gguf  # noqa: E402

import gguf_file  # noqa: E402
import make_models  # noqa: E402
import make_reference_logits  # noqa: E402
import model_kquants  # noqa: E402
import model_vocab  # noqa: E402
import reference_model as ref  # noqa: E402

MODELS = make_models.MODEL_NAMES


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("testdata")
    make_models.generate(out)
    return out


def model_file(out_dir, name):
    return make_models.model_path(out_dir, name)


def prompt_for(length, seed=0):
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(0, 512, size=length)]


# ---- an independent slow implementation ------------------------------------------------------


class LoopModel:
    """Reads the file with gguf.GGUFReader (not gguf_file) and runs one token and one head at a
    time with explicit loops; shares no code with reference_model."""

    def __init__(self, path):
        r = gguf.GGUFReader(str(path))
        self.meta = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.")}
        self.w = {}
        for t in r.tensors:
            shape = tuple(int(d) for d in reversed(t.shape.tolist()))
            self.w[t.name] = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
        a = self.arch = self.meta["general.architecture"]
        self.n_layer = self.meta[f"{a}.block_count"]
        self.n_embd = self.meta[f"{a}.embedding_length"]
        self.n_head = self.meta[f"{a}.attention.head_count"]
        self.n_kv = self.meta[f"{a}.attention.head_count_kv"]
        self.hd = self.meta.get(f"{a}.attention.key_length", self.n_embd // self.n_head)
        self.eps = self.meta[f"{a}.attention.layer_norm_rms_epsilon"]
        self.base = self.meta[f"{a}.rope.freq_base"]
        self.n_rot = self.meta.get(f"{a}.rope.dimension_count", self.hd)
        self.factors = self.w.get("rope_freqs.weight")
        self.window = self.meta.get(f"{a}.attention.sliding_window", 0)

    def norm(self, x, w):
        ms = sum(float(v) * float(v) for v in x) / len(x)
        return np.array([x[i] / math.sqrt(ms + self.eps) * w[i] for i in range(len(x))])

    def rotate(self, x, pos, base):
        d = self.n_rot  # dimensions d.. pass through
        out = list(x)
        for i in range(d // 2):
            theta = pos / base ** (2 * i / d)
            if self.factors is not None:
                theta /= float(self.factors.reshape(-1)[i])
            c, s = math.cos(theta), math.sin(theta)
            if self.arch == "llama":
                a, b = 2 * i, 2 * i + 1  # adjacent pairs
            else:
                a, b = i, i + d // 2  # NeoX halves
            out[a] = x[a] * c - x[b] * s
            out[b] = x[a] * s + x[b] * c
        return np.array(out)

    def moe(self, p, h):
        """qwen3moe's FFN for one row: softmax over the experts, the top k (lowest index first
        on ties), weights renormalized unless expert_weights_norm says otherwise."""
        logits = [float(v) for v in self.w[p + "ffn_gate_inp.weight"] @ h]
        top = max(logits)
        e = [math.exp(v - top) for v in logits]
        probs = [v / sum(e) for v in e]
        chosen = []
        for _ in range(self.meta[f"{self.arch}.expert_used_count"]):
            best = None
            for i in range(len(probs)):
                if i not in chosen and (best is None or probs[i] > probs[best]):
                    best = i
            chosen.append(best)
        norm = self.meta.get(f"{self.arch}.expert_weights_norm", True)
        total = sum(probs[i] for i in chosen) if norm else 1.0
        out = np.zeros(len(h))
        for i in chosen:
            gate = self.w[p + "ffn_gate_exps.weight"][i] @ h
            up = self.w[p + "ffn_up_exps.weight"][i] @ h
            act = np.array([g_ / (1 + math.exp(-g_)) for g_ in gate])
            out += probs[i] / total * (self.w[p + "ffn_down_exps.weight"][i] @ (act * up))
        return out

    def logits(self, ids):
        gemma = self.arch == "gemma3"
        keys = [[] for _ in range(self.n_layer)]
        vals = [[] for _ in range(self.n_layer)]
        rows = []
        for pos, tok in enumerate(ids):
            x = self.w["token_embd.weight"][tok].copy()
            if gemma:
                x *= math.sqrt(self.n_embd)
            for il in range(self.n_layer):
                p = f"blk.{il}."
                local = gemma and self.window > 0 and (il + 1) % 6 != 0
                base = 10000.0 if local else self.base
                h = self.norm(x, self.w[p + "attn_norm.weight"])
                q = self.w[p + "attn_q.weight"] @ h + self.w.get(p + "attn_q.bias", 0.0)
                k = self.w[p + "attn_k.weight"] @ h + self.w.get(p + "attn_k.bias", 0.0)
                v = self.w[p + "attn_v.weight"] @ h + self.w.get(p + "attn_v.bias", 0.0)
                k_heads, v_heads = [], []
                for g in range(self.n_kv):
                    kg = k[g * self.hd:(g + 1) * self.hd]
                    if p + "attn_k_norm.weight" in self.w:
                        kg = self.norm(kg, self.w[p + "attn_k_norm.weight"])
                    kg = self.rotate(kg, pos, base)
                    # The KV cache stores float16.
                    k_heads.append(np.array([float(np.float16(e)) for e in kg]))
                    v_heads.append(np.array([float(np.float16(e)) for e in v[g * self.hd:(g + 1) * self.hd]]))
                keys[il].append(k_heads)
                vals[il].append(v_heads)
                out = []
                for hh in range(self.n_head):
                    g = hh // (self.n_head // self.n_kv)
                    qh = q[hh * self.hd:(hh + 1) * self.hd]
                    if p + "attn_q_norm.weight" in self.w:
                        qh = self.norm(qh, self.w[p + "attn_q_norm.weight"])
                    qh = self.rotate(qh, pos, base)
                    first = max(0, pos - self.window + 1) if local else 0
                    scores = [float(qh @ keys[il][j][g]) / math.sqrt(self.hd) for j in range(first, pos + 1)]
                    top = max(scores)
                    e = [math.exp(s - top) for s in scores]
                    acc = np.zeros(self.hd)
                    for j, ej in zip(range(first, pos + 1), e):
                        acc += ej / sum(e) * vals[il][j][g]
                    out.append(acc)
                a = self.w[p + "attn_output.weight"] @ np.concatenate(out)
                if gemma:
                    a = self.norm(a, self.w[p + "post_attention_norm.weight"])
                x = x + a
                h = self.norm(x, self.w[p + "ffn_norm.weight"])
                if p + "ffn_gate_inp.weight" in self.w:
                    x = x + self.moe(p, h)
                    continue
                gate = self.w[p + "ffn_gate.weight"] @ h
                up = self.w[p + "ffn_up.weight"] @ h
                if gemma:
                    act = np.array([0.5 * g_ * (1 + math.tanh(math.sqrt(2 / math.pi) * (g_ + 0.044715 * g_ ** 3)))
                                    for g_ in gate])
                else:
                    act = np.array([g_ / (1 + math.exp(-g_)) for g_ in gate])
                f = self.w[p + "ffn_down.weight"] @ (act * up)
                if gemma:
                    f = self.norm(f, self.w[p + "post_ffw_norm.weight"])
                x = x + f
            out_w = self.w.get("output.weight", self.w["token_embd.weight"])
            rows.append(out_w @ self.norm(x, self.w["output_norm.weight"]))
        return np.array(rows)


@pytest.mark.parametrize("name", MODELS)
def test_reference_matches_loop_implementation(out_dir, name, monkeypatch):
    # The loop implementation checks the float64 forward pass itself; activation quantization
    # (which only feeds matmuls) is checked on its own below.
    monkeypatch.setattr(ref, "quantize_activations", lambda x: x)
    ref.release()
    path = model_file(out_dir, name)
    ids = prompt_for(12)  # 12 > tiny-gemma3's window of 8
    want = LoopModel(path).logits(ids)
    got = ref.logits(path, ids)
    assert got.shape == (12, 512)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name,n_rot,rope_freqs",
                         [("tiny-llama", 48, True), ("tiny-llama", 64, True),
                          ("tiny-qwen2", 40, False), ("tiny-qwen3", 48, True)])
def test_reference_matches_loop_implementation_with_factors_and_partial_rotary(
        tmp_path, name, n_rot, rope_freqs, monkeypatch):
    # Variants of the tiny models (not fixtures kiln reads) with rope.dimension_count < head_dim
    # (Phi-4-mini's partial rotary) and/or rope_freqs.weight (Llama 3's frequency factors).
    monkeypatch.setattr(ref, "quantize_activations", lambda x: x)
    ref.release()
    spec = dataclasses.replace(make_models.specs()[name], n_rot=n_rot, rope_freqs=rope_freqs)
    path = tmp_path / f"{name}-rot{n_rot}.gguf"
    make_models.write_model(spec, path)
    model = ref.Model(path)
    assert model.n_rot == n_rot and (model.rope_freqs is not None) == rope_freqs
    ids = prompt_for(12)
    np.testing.assert_allclose(ref.logits(path, ids), LoopModel(path).logits(ids), rtol=1e-9,
                               atol=1e-9)
    ref.release()


# ---- properties ---------------------------------------------------------------------------------


def test_kv_cache_rounding_to_f16_is_applied(out_dir, monkeypatch):
    path = model_file(out_dir, "tiny-llama")
    ids = prompt_for(10)
    monkeypatch.setattr(ref, "quantize_activations", lambda x: x)
    rounded = ref.Model(path).forward(ids)[0]
    monkeypatch.setattr(ref, "round_f16", lambda x: x)
    exact = ref.Model(path).forward(ids)[0]
    diff = np.abs(rounded - exact).max()
    # f16 keeps 11 significant bits: visible, but a small perturbation of O(1..10) logits.
    assert 1e-6 < diff < 0.05


def test_activation_quantization_matches_int8_codes():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 64)) * np.array([[1.0], [1e-3], [0.0]])
    got = ref.quantize_activations(x)
    for row in range(3):
        for b in range(2):
            blk = x[row, b * 32:(b + 1) * 32].astype(np.float32)
            amax = np.abs(blk).max()
            if amax == 0:
                np.testing.assert_array_equal(got[row, b * 32:(b + 1) * 32], 0)
                continue
            codes = np.rint(blk * (np.float32(127) / amax))
            assert np.abs(codes).max() == 127  # the largest input maps to +-127
            d = np.float64(np.float32(amax / np.float32(127)))
            np.testing.assert_allclose(got[row, b * 32:(b + 1) * 32], codes * d, rtol=0, atol=1e-12)
    # within half a quantization step of the input
    assert np.all(np.abs(got - x) <= np.abs(x).max(axis=1, keepdims=True) / 127 * 0.5 + 1e-12)


def test_round_f16_rounds_to_nearest_half_precision():
    x = np.array([1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 0.1, 65504.0, -3.14159])
    np.testing.assert_array_equal(ref.round_f16(x), [1.0, 1.0 + 2 * 2.0 ** -10, 0.0999755859375, 65504.0, -3.140625])


def test_sliding_window_changes_only_positions_past_the_window(out_dir):
    path = model_file(out_dir, "tiny-gemma3")
    model = ref.Model(path)
    assert model.sliding_window == 8
    assert model.local == [True, True, True, True, True, False]
    ids = prompt_for(20)
    windowed = model.forward(ids)[0]
    full = model.forward(ids, window_override=0)[0]
    # Position p sees keys (p-8, p]: identical to full attention while p < 8.
    np.testing.assert_allclose(windowed[:8], full[:8], rtol=0, atol=1e-12)
    assert np.abs(windowed[8:] - full[8:]).max(axis=1).min() > 1e-6


def test_local_layers_use_rope_base_10000(out_dir):
    model = ref.Model(model_file(out_dir, "tiny-gemma3"))
    assert model.rope_base == 1e6 and model.rope_base_local == 10000.0
    llama = ref.Model(model_file(out_dir, "tiny-llama"))
    assert not any(llama.local) and llama.sliding_window == 0


@pytest.mark.parametrize("neox", [False, True])
def test_rope_scores_depend_only_on_relative_position(neox):
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 2, 64))
    k = rng.standard_normal((1, 2, 64))

    def score(pq, pk):
        rq = ref.rope(q, np.array([pq]), 10000.0, 64, neox)
        rk = ref.rope(k, np.array([pk]), 10000.0, 64, neox)
        return np.sum(rq * rk, axis=-1)

    np.testing.assert_allclose(score(7, 3), score(107, 103), rtol=1e-10)
    assert np.abs(score(7, 3) - score(7, 4)).max() > 1e-3
    np.testing.assert_allclose(ref.rope(q, np.array([0]), 10000.0, 64, neox), q)


def test_rope_layouts_differ_by_a_permutation():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 2, 8))
    pos = np.array([0, 5, 9])
    interleave = np.array([0, 4, 1, 5, 2, 6, 3, 7])  # normal-layout slot -> NeoX index
    normal = ref.rope(x[..., interleave], pos, 10000.0, 8, neox=False)
    neox = ref.rope(x, pos, 10000.0, 8, neox=True)
    np.testing.assert_allclose(normal, neox[..., interleave], rtol=1e-12)


@pytest.mark.parametrize("neox", [False, True])
def test_rope_partial_rotary_and_factors(neox):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 2, 16))
    pos = np.array([0, 7, 3000])
    factors = np.array([1.0, 1.5, 4.0, 8.0, 2.0, 1.0])
    out = ref.rope(x, pos, 10000.0, 12, neox, factors)
    np.testing.assert_array_equal(out[..., 12:], x[..., 12:])  # past n_rot: untouched
    # The first 12 dimensions are a full rope of a 12-wide head, every frequency divided.
    head = x[..., :12]
    want = np.empty_like(head)
    for t, p in enumerate(pos):
        for i in range(6):
            theta = p * 10000.0 ** (-2 * i / 12) / factors[i]
            a, b = (i, i + 6) if neox else (2 * i, 2 * i + 1)
            want[t, :, a] = head[t, :, a] * math.cos(theta) - head[t, :, b] * math.sin(theta)
            want[t, :, b] = head[t, :, a] * math.sin(theta) + head[t, :, b] * math.cos(theta)
    np.testing.assert_allclose(out[..., :12], want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref.rope(x, pos, 10000.0, 12, neox, np.ones(6)),
                               ref.rope(x, pos, 10000.0, 12, neox), rtol=0, atol=0)
    with pytest.raises(ValueError):
        ref.rope(x, pos, 10000.0, 12, neox, np.ones(8))


@pytest.mark.parametrize("name", ["tiny-gemma3", "tiny-qwen2"])
def test_greedy_matches_argmax_of_full_recompute(out_dir, name):
    path = model_file(out_dir, name)
    prompt = prompt_for(10)  # gemma3: decoding runs past the window
    ids, margins, prompt_logits = ref.greedy_trace(path, prompt, 8)
    assert ids == ref.greedy(path, prompt, 8)
    full = ref.logits(path, prompt + ids)
    np.testing.assert_allclose(prompt_logits, full[:len(prompt)], rtol=1e-12, atol=1e-12)
    assert ids == [int(np.argmax(full[len(prompt) - 1 + i])) for i in range(8)]
    for i, m in enumerate(margins):
        top = np.sort(full[len(prompt) - 1 + i])
        assert m == pytest.approx(top[-1] - top[-2], abs=1e-9)


def test_batched_sequences_match_single_runs(out_dir):
    path = model_file(out_dir, "tiny-qwen3")
    model = ref.Model(path)
    a, b = prompt_for(7, 1), prompt_for(11, 2)
    ca, cb = model.new_cache(), model.new_cache()
    la, lb = model.forward_batch([(a, ca), (b, cb)])
    np.testing.assert_allclose(la, model.forward(a)[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lb, model.forward(b)[0], rtol=1e-12, atol=1e-12)
    assert ca["pos"] == 7 and cb["pos"] == 11


def test_qwen3moe_experts_are_3d_slices_in_llama_cpp_layout(out_dir):
    f = gguf_file.GgufFile(model_file(out_dir, "tiny-qwen3moe"))
    assert f.get("qwen3moe.expert_count") == 8 and f.get("qwen3moe.expert_used_count") == 2
    assert f.get("qwen3moe.expert_feed_forward_length") == 64
    assert "qwen3moe.expert_weights_norm" not in f.metadata  # absent: renormalize (the default)
    # GGUF lists dimensions fastest first: [D, F, E] is row-major [E, F, D].
    assert f.tensor_info["blk.0.ffn_gate_inp.weight"][0] == [256, 8]
    assert f.tensor_info["blk.0.ffn_gate_exps.weight"][0] == [256, 64, 8]
    assert f.tensor_info["blk.0.ffn_up_exps.weight"][0] == [256, 64, 8]
    assert f.tensor_info["blk.0.ffn_down_exps.weight"][0] == [64, 256, 8]
    model = ref.Model(model_file(out_dir, "tiny-qwen3moe"))
    assert model.w["blk.1.ffn_down_exps.weight"].shape == (8, 256, 64)


def test_qwen3moe_routing(out_dir):
    model = ref.Model(model_file(out_dir, "tiny-qwen3moe"))
    x = np.random.default_rng(9).standard_normal((64, 256))
    ids, weights = model.route(0, x)
    assert ids.shape == weights.shape == (64, 2)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(weights[:, 0] >= weights[:, 1]) and np.all(ids[:, 0] != ids[:, 1])
    assert len(np.unique(ids)) == 8  # every expert is somebody's choice: the router is not degenerate
    model.expert_weights_norm = False
    _, raw = model.route(0, x)
    assert np.all(raw.sum(axis=1) < 1.0)
    np.testing.assert_allclose(raw / raw.sum(axis=1, keepdims=True), weights, rtol=1e-12)
    # Ties go to the lowest expert: make experts 5 and 3 copies of expert 6's router row.
    model.w["blk.0.ffn_gate_inp.weight"] = model.w["blk.0.ffn_gate_inp.weight"].copy()
    row = model.w["blk.0.ffn_gate_inp.weight"][6] * 50.0
    for e in (3, 5, 6):
        model.w["blk.0.ffn_gate_inp.weight"][e] = row
    tied, _ = model.route(0, row[None, :] / np.linalg.norm(row))
    assert tied.tolist() == [[3, 5]]


def test_final_logit_softcapping_when_present(out_dir):
    model = ref.Model(model_file(out_dir, "tiny-gemma3"))
    assert model.softcap is None  # the tiny file, like the 270M one, has no such key
    ids = prompt_for(6)
    raw = model.forward(ids)[0]
    model.softcap = 5.0
    capped = model.forward(ids)[0]
    np.testing.assert_allclose(capped, 5.0 * np.tanh(raw / 5.0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_logits_are_well_conditioned(out_dir, name):
    out = ref.logits(model_file(out_dir, name), prompt_for(16))
    assert np.isfinite(out).all()
    assert 1.0 < out.std() < 10.0 and np.abs(out).max() < 50.0


# ---- the files ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MODELS)
def test_gguf_file_reader_agrees_with_gguf_package(out_dir, name):
    path = model_file(out_dir, name)
    mine = gguf_file.GgufFile(path)
    theirs = gguf.GGUFReader(str(path))
    keys = [k for k in theirs.fields if not k.startswith("GGUF.")]
    assert list(mine.metadata) == keys
    for k in keys:
        assert mine.metadata[k] == theirs.fields[k].contents(), k
    assert [t.name for t in theirs.tensors] == list(mine.tensor_info)
    for t in theirs.tensors:
        data, qtype, _ = mine.raw(t.name)
        assert qtype == t.tensor_type
        np.testing.assert_array_equal(data.reshape(-1), np.asarray(t.data).view(np.uint8).reshape(-1))


EXPECTED_TYPES = {
    "tiny-gemma3": {"Q8_0", "Q4_K", "Q6_K", "Q5_0", "F32"},
    "tiny-llama": {"F16", "F32", "Q8_0", "Q4_0"},
    "tiny-qwen2": {"BF16", "F16", "Q8_0", "Q5_0", "F32"},
    "tiny-qwen3": {"Q4_K", "Q5_K", "Q6_K", "Q8_0", "F32"},
    "tiny-mistral": {"Q4_K", "Q6_K", "Q5_0", "Q4_0", "F16", "F32"},
    "tiny-qwen3moe": {"Q4_K", "Q6_K", "Q8_0", "Q5_0", "F16", "F32"},
    "tiny-quants": {"Q4_1", "Q5_1", "Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS", "MXFP4", "F32"},
}


@pytest.mark.parametrize("name", MODELS)
def test_models_carry_llama_cpp_names(out_dir, name):
    f = gguf_file.GgufFile(model_file(out_dir, name))
    arch = f.get("general.architecture")
    spec = make_models.specs()[name]
    assert arch == spec.arch
    for key in ["context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
                "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "rope.freq_base"]:
        assert f"{arch}.{key}" in f.metadata, key
    names = set(f.tensor_info)
    per_layer = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm"}
    if arch == "qwen3moe":
        per_layer |= {"ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}
        for key in ["expert_count", "expert_used_count", "expert_feed_forward_length"]:
            assert f"{arch}.{key}" in f.metadata, key
    else:
        per_layer |= {"ffn_gate", "ffn_up", "ffn_down"}
    for il in range(spec.n_layer):
        assert {f"blk.{il}.{n}.weight" for n in per_layer} <= names
    assert ("output.weight" in names) == (not spec.tied)
    assert ("blk.0.attn_q_norm.weight" in names) == (arch in ("gemma3", "qwen3", "qwen3moe"))
    assert ("blk.0.post_ffw_norm.weight" in names) == (arch == "gemma3")
    assert ("blk.0.attn_k.bias" in names) == (arch == "qwen2")
    if arch == "gemma3":
        assert f.get("gemma3.attention.sliding_window") == 8
        assert f.get("gemma3.attention.key_length") == 64
        assert "gemma3.rope.freq_base_swa" not in f.metadata  # llama.cpp's converter writes none
        assert f.tensor_info["token_embd.weight"][1].name == "Q8_0"
    assert {q.name for _, q, _ in f.tensor_info.values()} == EXPECTED_TYPES[name]
    # token_embd is [n_embd, n_vocab] fastest-first.
    assert f.tensor_info["token_embd.weight"][0] == [256, 512]


@pytest.mark.parametrize("name", MODELS)
def test_tokenizer_metadata_is_consistent(out_dir, name):
    f = gguf_file.GgufFile(model_file(out_dir, name))
    tokens = f.get("tokenizer.ggml.tokens")
    types = f.get("tokenizer.ggml.token_type")
    assert len(tokens) == len(types) == 512 == len(set(tokens))
    assert f.get("tokenizer.chat_template")
    bos, eos = f.get("tokenizer.ggml.bos_token_id"), f.get("tokenizer.ggml.eos_token_id")
    assert types[bos] == model_vocab.CONTROL and types[eos] == model_vocab.CONTROL
    if f.get("tokenizer.ggml.model") == "llama":
        assert [tokens.index(f"<0x{b:02X}>") for b in range(256)] == list(range(tokens.index("<0x00>"),
                                                                               tokens.index("<0x00>") + 256))
        assert len(f.get("tokenizer.ggml.scores")) == 512
        if name == "tiny-gemma3":
            assert tokens[:6] == ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    else:
        assert f.get("tokenizer.ggml.pre") in ("llama-bpe", "qwen2")
        vocab = set(tokens)
        for merge in f.get("tokenizer.ggml.merges"):
            left, right = merge.split(" ")
            assert left in vocab and right in vocab and left + right in vocab


@pytest.mark.parametrize("encode,qtype,tol", [
    (model_kquants.quantize_q4_k, gguf.GGMLQuantizationType.Q4_K, 0.1),
    (model_kquants.quantize_q5_k, gguf.GGMLQuantizationType.Q5_K, 0.05),
    (model_kquants.quantize_q6_k, gguf.GGMLQuantizationType.Q6_K, 0.025),
])
def test_kquant_blocks_decode_with_gguf(encode, qtype, tol):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 512)) * 0.1).astype(np.float32)
    x[1] = np.abs(x[1])  # all positive: min clamps at 0
    x[2] = 0.0  # zero scales must stay finite
    x[3, :256] *= 100.0
    blocks = encode(x)
    assert blocks.dtype == np.uint8 and blocks.shape == (6, 512 // 256 * gguf.GGML_QUANT_SIZES[qtype][1])
    y = gguf.quants.dequantize(blocks, qtype)
    assert np.isfinite(y).all()
    np.testing.assert_array_equal(y[2], 0.0)
    for row in (0, 1, 3, 4, 5):
        for half in (slice(0, 256), slice(256, 512)):
            err = np.sqrt(np.mean((y[row, half] - x[row, half]) ** 2)) / np.sqrt(np.mean(x[row, half] ** 2))
            assert err < tol, (row, err)


def test_models_are_deterministic_and_not_rewritten(out_dir):
    path = model_file(out_dir, "tiny-llama")
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    assert make_models.write_model(make_models.specs()["tiny-llama"], path) is False
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_reference_files_match_their_description(out_dir, capsys):
    name = "tiny-gemma3"
    make_reference_logits._generate_tiny(out_dir, name)
    folder = out_dir / "ref" / name
    path = model_file(out_dir, name)
    for case, length in make_reference_logits.TINY_CASES:
        doc = json.loads((folder / f"{case}.json").read_text())
        assert doc["model"] == f"models/{name}.gguf" and (out_dir / doc["model"]).exists()
        prompt = doc["prompt_ids"]
        assert len(prompt) == length and prompt[0] == doc["bos_id"] == 2
        assert doc["logits_positions"] == list(range(length))
        rows = np.fromfile(folder / doc["logits_file"], dtype="<f4").reshape(length, doc["n_vocab"])
        np.testing.assert_allclose(rows, ref.logits(path, prompt), rtol=1e-6, atol=1e-6)
        assert doc["greedy_ids"] == ref.greedy(path, prompt, 32)
        assert doc["greedy_ids"][0] == int(np.argmax(rows[-1]))
        assert doc["min_margin"] >= make_reference_logits.MIN_MARGIN
    mtime = (folder / "long.logits.f32").stat().st_mtime_ns
    capsys.readouterr()
    make_reference_logits._generate_tiny(out_dir, name)
    assert "up to date" in capsys.readouterr().out
    assert (folder / "long.logits.f32").stat().st_mtime_ns == mtime
