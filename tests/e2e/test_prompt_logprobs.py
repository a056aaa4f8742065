"""Prompt logprobs (scoring) through the HTTP APIs: OpenAI `echo` + `logprobs` (the official
client) and SGLang's `return_logprob` / `logprob_start_len`, checked against `kiln logits`
(every position's logits from eager decode steps, log-softmaxed here), with and without a
prefix-cache hit; and the tokenizer routes lm-evaluation-harness uses."""
import subprocess

import numpy as np
import openai
import pytest
import requests

from kiln_server import kiln_bin

PROMPT = "The quick brown fox jumps over the lazy dog, and then it runs far away."


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def prompt_ids(server):
    r = requests.post(server.url + "/tokenize", json={"prompt": PROMPT}, timeout=30)
    r.raise_for_status()
    return r.json()["tokens"]


@pytest.fixture(scope="module")
def reference(gemma, prompt_ids, tmp_path_factory):
    """logprob of prompt token p after tokens [0, p), p = 1.., from eager decode steps."""
    d = tmp_path_factory.mktemp("logits")
    (d / "ids.txt").write_text(" ".join(map(str, prompt_ids)))
    subprocess.run([kiln_bin(), "logits", "-m", str(gemma), "--ids", str(d / "ids.txt"),
                    "-o", str(d / "out.f32"), "--graph-mode", "off", "--threads", "2"],
                   check=True, capture_output=True, timeout=300)
    logits = np.fromfile(d / "out.f32", dtype=np.float32).reshape(len(prompt_ids), -1)
    x = logits.astype(np.float64)
    logz = x.max(axis=1) + np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1))
    return [float(x[p - 1, prompt_ids[p]] - logz[p - 1]) for p in range(1, len(prompt_ids))]


def test_openai_echo_scores_the_prompt_without_generating(client, server, prompt_ids, reference):
    model = client.models.list().data[0].id
    for _ in range(2):  # the second finds the prompt cached, yet must recompute each scored row
        c = client.completions.create(model=model, prompt=PROMPT, max_tokens=0, echo=True,
                                      logprobs=2, temperature=0)
        ch = c.choices[0]
        assert ch.text == PROMPT
        assert ch.finish_reason == "length"
        lp = ch.logprobs
        assert len(lp.tokens) == len(prompt_ids)
        assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        np.testing.assert_allclose(lp.token_logprobs[1:], reference, atol=2e-3)
        for tok_lp, top in zip(lp.token_logprobs[1:], lp.top_logprobs[1:]):
            assert 1 <= len(top) <= 2
            assert max(top.values()) >= tok_lp - 1e-6
        assert c.usage.completion_tokens == 0
        assert c.usage.prompt_tokens == len(prompt_ids)


def test_openai_echo_with_generation_and_token_id_prompts(client, server, prompt_ids, reference):
    model = client.models.list().data[0].id
    plain = client.completions.create(model=model, prompt=PROMPT, max_tokens=4, temperature=0,
                                      logprobs=1, extra_body={"ignore_eos": True})
    # lm-eval's loglikelihood request: token ids, echo, logprobs 1, max_tokens 1.
    c = client.completions.create(model=model, prompt=prompt_ids, max_tokens=4, echo=True,
                                  logprobs=1, temperature=0, extra_body={"ignore_eos": True})
    ch = c.choices[0]
    assert ch.text.endswith(plain.choices[0].text)
    assert PROMPT in ch.text
    lp = ch.logprobs
    assert len(lp.token_logprobs) == len(prompt_ids) + 4
    np.testing.assert_allclose(lp.token_logprobs[1:len(prompt_ids)], reference, atol=2e-3)
    np.testing.assert_allclose(lp.token_logprobs[len(prompt_ids):],
                               plain.choices[0].logprobs.token_logprobs, atol=1e-5)
    assert lp.text_offset == sorted(lp.text_offset)


def test_openai_echo_stream_equals_whole(client):
    model = client.models.list().data[0].id
    kwargs = dict(model=model, prompt=PROMPT, max_tokens=5, echo=True, logprobs=1,
                  temperature=0, extra_body={"ignore_eos": True})
    whole = client.completions.create(**kwargs).choices[0]
    chunks = [ch for ch in client.completions.create(**kwargs, stream=True) if ch.choices]
    assert "".join(ch.choices[0].text for ch in chunks) == whole.text
    assert chunks[0].choices[0].text == PROMPT
    streamed = [x for ch in chunks for x in ch.choices[0].logprobs.token_logprobs]
    assert streamed[0] is None
    np.testing.assert_allclose(streamed[1:], whole.logprobs.token_logprobs[1:], atol=1e-6)


def test_native_input_token_logprobs(server, prompt_ids, reference):
    for start in (0, 5):
        out = server.generate({"input_ids": prompt_ids, "return_logprob": True,
                               "logprob_start_len": start, "top_logprobs_num": 2,
                               "return_text_in_logprobs": True,
                               "sampling_params": {"max_new_tokens": 2, "temperature": 0}})
        meta = out["meta_info"]
        inp, tops = meta["input_token_logprobs"], meta["input_top_logprobs"]
        assert [t[1] for t in inp] == prompt_ids[start:]
        if start == 0:
            assert inp[0][0] is None and tops[0] is None
            inp, tops = inp[1:], tops[1:]
        np.testing.assert_allclose([t[0] for t in inp], reference[max(start, 1) - 1:], atol=2e-3)
        for top in tops:
            assert len(top) == 2 and top[0][0] >= top[1][0]
            assert all(isinstance(t[2], str) for t in top)
        assert len(meta["output_token_logprobs"]) == 2


def test_native_logprob_defaults_and_errors(server, prompt_ids):
    out = server.generate({"input_ids": prompt_ids, "return_logprob": True,
                           "sampling_params": {"max_new_tokens": 2, "temperature": 0}})
    assert out["meta_info"]["input_token_logprobs"] == []  # -1: output logprobs only
    r = requests.post(server.url + "/generate", json={
        "input_ids": prompt_ids, "return_logprob": True,
        "logprob_start_len": len(prompt_ids) + 1}, timeout=30)
    assert r.status_code == 400 and "logprob_start_len" in r.text


def test_tokenizer_routes_for_remote_tokenizers(server):
    info = requests.get(server.url + "/tokenizer_info", timeout=30).json()
    assert info["eos_token"] and info["model_max_length"] > 0
    eos = requests.post(server.url + "/tokenize", json={
        "prompt": info["eos_token"], "add_special_tokens": False}, timeout=30).json()["tokens"]
    assert len(eos) == 1
    ids = requests.post(server.url + "/tokenize", json={
        "prompt": "hello world", "add_special_tokens": False}, timeout=30).json()["tokens"]
    back = requests.post(server.url + "/detokenize", json={"tokens": ids}, timeout=30).json()
    assert back["prompt"] == back["text"] == "hello world"
