"""`kiln perplexity`: the figure equals a direct computation from `kiln logits` (eager decode
steps) on the same windows, by llama-perplexity's method; the KL-divergence base file round
trip; clear errors for bad input."""
import json
import pathlib
import random
import subprocess

import gguf
import numpy as np
import pytest

from kiln_server import REPO, kiln_bin

ORACLE = REPO / "tests" / "oracle" / "data" / "llama"


def kiln(*args, timeout=300):
    return subprocess.run([kiln_bin(), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def last_json(stdout: str) -> dict:
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> pathlib.Path:
    rng = random.Random(5)
    words = ("the of and to in a is that for it as was with be by on not he this are or his "
             "from at which but have an they you were her she there").split()
    path = tmp_path_factory.mktemp("ppl") / "text.txt"
    path.write_text(" ".join(rng.choice(words) for _ in range(1500)))
    return path


def bos_of(model: pathlib.Path):
    r = gguf.GGUFReader(str(model))
    add = r.fields.get("tokenizer.ggml.add_bos_token")
    if add is not None and not bool(add.parts[-1][0]):
        return None
    return int(r.fields["tokenizer.ggml.bos_token_id"].parts[-1][0])


def direct_ppl(model, ids, n_ctx, chunks, workdir) -> float:
    """llama-perplexity's figure computed here from per-position logits of each window."""
    bos = bos_of(model)
    nll, count = 0.0, 0
    for c in range(chunks):
        window = ids[c * n_ctx:(c + 1) * n_ctx]
        if bos is not None:
            window[0] = bos
        (workdir / "w.txt").write_text(" ".join(map(str, window)))
        r = kiln("logits", "-m", model, "--ids", workdir / "w.txt", "-o", workdir / "w.f32",
                 "--graph-mode", "off", "--threads", "2")
        assert r.returncode == 0, r.stderr
        x = np.fromfile(workdir / "w.f32", dtype=np.float32).reshape(n_ctx, -1).astype(np.float64)
        mx = x.max(axis=1, keepdims=True)
        logz = (mx + np.log(np.exp(x - mx).sum(axis=1, keepdims=True)))[:, 0]
        for j in range(n_ctx // 2, n_ctx - 1):
            nll -= x[j, window[j + 1]] - logz[j]
            count += 1
    return float(np.exp(nll / count))


@pytest.mark.parametrize("model_name", ["gemma", "oracle-llama"])
def test_perplexity_equals_a_direct_computation(model_name, gemma, text_file, tmp_path):
    model = gemma if model_name == "gemma" else ORACLE / "model.f32.gguf"
    r = kiln("perplexity", "-m", model, "-f", text_file, "-c", 64, "--chunks", 3,
             "--dump-tokens", tmp_path / "ids.txt", "--threads", "2")
    assert r.returncode == 0, r.stderr
    out = last_json(r.stdout)
    assert out["chunks"] == 3 and out["tokens_scored"] == 3 * 31
    assert "Final estimate: PPL = " in r.stdout
    ids = [int(t) for t in (tmp_path / "ids.txt").read_text().split()]
    assert len(ids) == 3 * 64
    assert out["ppl"] == pytest.approx(direct_ppl(model, ids, 64, 3, tmp_path), rel=2e-3)


def test_kl_divergence_base_and_compare(text_file, tmp_path):
    f32, q8 = ORACLE / "model.f32.gguf", ORACLE / "model.q8_0.gguf"
    base = tmp_path / "base.kld"
    r = kiln("perplexity", "-m", f32, "-f", text_file, "-c", 64, "--chunks", 4,
             "--kl-divergence-base", base, "--threads", "2")
    assert r.returncode == 0, r.stderr
    base_ppl = last_json(r.stdout)["ppl"]
    # The same model in another mode: no divergence, every top token the same.
    same = kiln("perplexity", "-m", f32, "-f", text_file, "-c", 64, "--chunks", 4,
                "--kl-divergence", base, "--graph-mode", "off", "--threads", "2")
    assert same.returncode == 0, same.stderr
    s = [json.loads(x) for x in same.stdout.splitlines() if x.startswith('{"ppl_q"')][0]
    assert s["mean_kld"] < 1e-6 and s["same_top"] == 1.0
    assert s["ppl_base"] == pytest.approx(base_ppl, rel=1e-4)
    # Its Q8_0 quantization diverges a little.
    q = kiln("perplexity", "-m", q8, "-f", text_file, "-c", 64, "--chunks", 4,
             "--kl-divergence", base, "--threads", "2")
    assert q.returncode == 0, q.stderr
    k = [json.loads(x) for x in q.stdout.splitlines() if x.startswith('{"ppl_q"')][0]
    assert 0 < k["mean_kld"] < 0.05 and k["same_top"] > 0.75
    assert k["positions"] == 4 * 31
    assert "Mean    KLD:" in q.stdout and "Same top p:" in q.stdout
    # A base made with another context size is refused.
    bad = kiln("perplexity", "-m", q8, "-f", text_file, "-c", 32, "--chunks", 4,
               "--kl-divergence", base)
    assert bad.returncode != 0 and "--ctx-size 64" in bad.stderr


def test_perplexity_errors(gemma, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("too short")
    r = kiln("perplexity", "-m", gemma, "-f", short, "-c", 64)
    assert r.returncode != 0 and "needs at least 128" in r.stderr
    r = kiln("perplexity", "-m", gemma, "-f", short, "--chunks", 0)
    assert r.returncode != 0 and "--chunks must be at least 1" in r.stderr
    r = kiln("perplexity", "-m", gemma, "-f", tmp_path / "missing.txt")
    assert r.returncode != 0 and "cannot open" in r.stderr
    junk = tmp_path / "junk.kld"
    junk.write_bytes(b"not a base file")
    text = tmp_path / "t.txt"
    text.write_text("word " * 400)
    r = kiln("perplexity", "-m", gemma, "-f", text, "-c", 64, "--kl-divergence", junk)
    assert r.returncode != 0 and "not a kiln KL-divergence base file" in r.stderr
