"""`kiln serve` on an embedding model (the tiny random BERT folder of tests/oracle/embeddings):
/v1/embeddings through the official `openai` client (float and base64, strings and token ids,
usage, model), SGLang's /encode, the values against sentence-transformers' goldens, concurrent
requests batched together, the routes' 400s, generation refused on the encoder with the reason,
and a 404 naming the route on a generative model."""
import base64
import concurrent.futures
import json

import numpy as np
import pytest

from kiln_server import REPO

openai = pytest.importorskip("openai")

CASE = REPO / "tests" / "oracle" / "embeddings" / "bert-mean"
GOLDEN = json.loads((CASE / "golden.json").read_text())


@pytest.fixture(scope="module")
def embedder(server_factory):
    s = server_factory(CASE / "model", "--served-model-name", "tiny-bert", name="embedder")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(embedder):
    return openai.OpenAI(base_url=embedder.url + "/v1", api_key="none")


def cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def golden(text):
    return GOLDEN["embeddings"][GOLDEN["texts"].index(text)]


def test_openai_client_floats_match_sentence_transformers(client):
    texts = [t for t in GOLDEN["texts"] if t][:12]
    r = client.embeddings.create(model="tiny-bert", input=texts, encoding_format="float")
    assert r.model == "tiny-bert" and r.object == "list"
    assert [d.index for d in r.data] == list(range(len(texts)))
    for text, d in zip(texts, r.data):
        assert len(d.embedding) == 64
        assert cosine(d.embedding, golden(text)) >= 0.9999, text
    ids = [GOLDEN["ids"][GOLDEN["texts"].index(t)] for t in texts]
    assert r.usage.prompt_tokens == r.usage.total_tokens == sum(len(i) for i in ids)


def test_openai_client_base64_equals_floats(client):
    text = "Hello world"
    floats = client.embeddings.create(model="tiny-bert", input=text, encoding_format="float")
    # The client decodes base64 itself when it asked for it (its default format).
    b64 = client.embeddings.create(model="tiny-bert", input=text)
    assert np.array_equal(np.asarray(b64.data[0].embedding, np.float32),
                          np.asarray(floats.data[0].embedding, np.float32))


def test_raw_base64_is_little_endian_float32(embedder):
    r = embedder.post("/v1/embeddings", {"input": "Hello world", "encoding_format": "base64"})
    assert r.status_code == 200, r.text
    v = np.frombuffer(base64.b64decode(r.json()["data"][0]["embedding"]), dtype="<f4")
    assert v.shape == (64,) and cosine(v, golden("Hello world")) >= 0.9999


def test_token_ids_are_the_model_input(client):
    i = GOLDEN["texts"].index("Hello world")
    ids = GOLDEN["ids"][i]
    one = client.embeddings.create(model="tiny-bert", input=ids, encoding_format="float")
    two = client.embeddings.create(model="tiny-bert", input=[ids, ids[:3]], encoding_format="float")
    assert cosine(one.data[0].embedding, GOLDEN["embeddings"][i]) >= 0.9999
    assert len(two.data) == 2 and one.usage.prompt_tokens == len(ids)
    assert np.allclose(two.data[0].embedding, one.data[0].embedding, atol=1e-6)


def test_long_text_is_truncated_unless_asked_not_to(embedder):
    long = GOLDEN["texts"][-1]
    r = embedder.post("/v1/embeddings", {"input": long})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] == GOLDEN["max_seq_length"]
    assert cosine(r.json()["data"][0]["embedding"], golden(long)) >= 0.9999
    r = embedder.post("/v1/embeddings", {"input": long, "truncate": False})
    assert r.status_code == 400 and "tokens long" in r.json()["error"]["message"]


def test_native_encode(embedder):
    r = embedder.post("/encode", {"text": "Hello world"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert cosine(body["embedding"], golden("Hello world")) >= 0.9999
    assert body["meta_info"]["prompt_tokens"] == len(GOLDEN["ids"][GOLDEN["texts"].index("Hello world")])
    r = embedder.post("/encode", {"text": ["Hello world", "HELLO, World!!! How are you?"]})
    assert r.status_code == 200 and len(r.json()) == 2
    ids = GOLDEN["ids"][GOLDEN["texts"].index("Hello world")]
    r = embedder.post("/encode", {"input_ids": ids})
    assert r.status_code == 200 and cosine(r.json()["embedding"], golden("Hello world")) >= 0.9999


def test_concurrent_requests_get_their_own_vectors(embedder):
    texts = [t for t in GOLDEN["texts"] if t][:24]

    def one(text):
        r = embedder.post("/v1/embeddings", {"input": text})
        assert r.status_code == 200, r.text
        return r.json()["data"][0]["embedding"]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(one, texts))
    for text, v in zip(texts, got):
        assert cosine(v, golden(text)) >= 0.9999, text


@pytest.mark.parametrize("body,needle", [
    ({}, "input is required"),
    ({"input": ""}, "empty string"),
    ({"input": []}, "empty list"),
    ({"input": [[]]}, "empty list of token ids"),
    ({"input": 5}, "must be a string"),
    ({"input": ["a", 5]}, "input[1] must be a string"),
    ({"input": [[1, 2], "a"]}, "input[1] must be a list of token ids"),
    ({"input": [1, "a"]}, "only token ids"),
    ({"input": [1.5]}, "must be a string"),
    ({"input": [10 ** 9]}, "outside the vocabulary"),
    ({"input": [-1]}, "out of range"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
    ({"input": "x", "dimensions": 32}, "dimensions 32 is not supported"),
    ({"input": "x", "dimensions": "64"}, "dimensions must be an integer"),
    ({"input": "x", "truncate": "no"}, "truncate must be true or false"),
    ({"input": [[1] * 41]}, "is 41 tokens long"),
])
def test_openai_route_errors(embedder, body, needle):
    r = embedder.post("/v1/embeddings", body)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"], r.json()


def test_dimensions_equal_to_the_model_are_accepted(embedder):
    r = embedder.post("/v1/embeddings", {"input": "x", "dimensions": 64})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("body,needle", [
    ({}, "exactly one of text and input_ids"),
    ({"text": "a", "input_ids": [1]}, "exactly one"),
    ({"text": 3}, "text must be a string"),
    ({"input_ids": "abc"}, "input_ids must be"),
    ({"text": []}, "empty list"),
])
def test_native_route_errors(embedder, body, needle):
    r = embedder.post("/encode", body)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"]["message"], r.json()


@pytest.mark.parametrize("path,body", [
    ("/generate", {"text": "hello", "sampling_params": {"max_new_tokens": 2}}),
    ("/v1/completions", {"model": "tiny-bert", "prompt": "hello", "max_tokens": 2}),
    ("/v1/chat/completions", {"model": "tiny-bert", "messages": [{"role": "user", "content": "hi"}]}),
])
def test_generation_on_an_encoder_is_refused_with_the_reason(embedder, path, body):
    r = embedder.post(path, body)
    assert 400 <= r.status_code < 500, r.text
    assert "is an embedding model" in r.json()["error"]["message"], r.json()


def test_model_info_says_it_embeds(embedder, server):
    assert embedder.get("/get_model_info").json()["is_generation"] is False
    assert server.get("/get_model_info").json()["is_generation"] is True


def test_generative_model_answers_404_naming_the_route(server):
    for path, body in [("/v1/embeddings", {"input": "hello"}), ("/encode", {"text": "hello"})]:
        r = server.post(path, body)
        assert r.status_code == 404, r.text
        message = r.json()["error"]["message"]
        assert path in message and "not an embedding model" in message
        assert "--embeddings" in message


DECODER = json.loads((REPO / "tests" / "oracle" / "embeddings" / "decoder-qwen2.json").read_text())


@pytest.mark.parametrize("mode", ["last", "mean"])
def test_generative_model_embeds_beside_generation(server_factory, mode):
    """`kiln serve --embeddings MODE` on a generative model: /v1/embeddings from its final-norm
    hidden states (float64 transformers goldens, normalized), answered while a generation
    streams, which finishes as it would alone."""
    s = server_factory(REPO / DECODER["gguf"], "--embeddings", mode, name=f"decoder-{mode}")
    try:
        body = {"input_ids": DECODER["ids"][0], "sampling_params": {
            "max_new_tokens": 48, "temperature": 0, "ignore_eos": True}}
        alone = s.generate(body)["output_ids"]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            gen = pool.submit(s.generate, body)
            for _ in range(3):
                r = s.post("/v1/embeddings", {"input": DECODER["ids"]})
                assert r.status_code == 200, r.text
                for item, want in zip(r.json()["data"], DECODER["pooled"][mode]):
                    assert cosine(item["embedding"], want) >= 0.9999
            assert gen.result()["output_ids"] == alone
        r = s.post("/encode", {"text": "hello world"})
        assert r.status_code == 200 and len(r.json()["embedding"]) == len(DECODER["pooled"]["last"][0])
        assert s.get("/get_model_info").json()["is_generation"] is True
    finally:
        s.stop()


def test_generative_model_embedding_inputs_past_the_pool(server_factory):
    """Inputs that need more KV pages together than the pool holds run in turns, as prompts
    do, with the vectors they get one at a time; an input that could not fit the pool even
    alone is a 400 naming it."""
    s = server_factory(REPO / DECODER["gguf"], "--embeddings", "last", "--kv-tokens", "64",
                       name="decoder-small-pool")
    try:
        r = s.post("/v1/embeddings", {"input": DECODER["ids"] * 3})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["prompt_tokens"] == 3 * sum(len(i) for i in DECODER["ids"])
        for item in r.json()["data"]:
            want = DECODER["pooled"]["last"][item["index"] % len(DECODER["ids"])]
            assert cosine(item["embedding"], want) >= 0.9999
        too_long = [i for ids in DECODER["ids"] for i in ids] * 2
        r = s.post("/v1/embeddings", {"input": [DECODER["ids"][0], too_long]})
        assert r.status_code == 400, r.text
        assert "input[1]" in r.json()["error"]["message"], r.text
        s.assert_all_pages_free()
    finally:
        s.stop()


def test_gguf_encoder_is_served(server_factory, embedder):
    """`kiln serve` on a GGUF BERT (llama.cpp's converter, tests/oracle/make_bert_gguf_golden.py)
    is an embedding server like the folder's, with the folder's vectors."""
    s = server_factory(REPO / "tests" / "oracle" / "embeddings" / "bert-mean-gguf" /
                       "model.f32.gguf", name="gguf-embedder")
    try:
        body = {"input": ["Hello world", "HELLO, World!!! How are you?"]}
        r = s.post("/v1/embeddings", body)
        assert r.status_code == 200, r.text
        want = embedder.post("/v1/embeddings", body).json()["data"]
        assert [d["embedding"] for d in r.json()["data"]] == [d["embedding"] for d in want]
        assert s.get("/get_model_info").json()["is_generation"] is False
    finally:
        s.stop()


def test_encoder_precision_flag(server_factory, embedder, tmp_path):
    """`kiln serve --encoder-precision f32` serves `kiln embed --precision f32`'s vectors, not
    the default bf16 ones; a value that is neither is refused at start with the choices."""
    import subprocess

    from kiln_server import kiln_bin

    s = server_factory(CASE / "model", "--encoder-precision", "f32", name="embedder-f32")
    try:
        text = "Hello world"
        got = s.post("/v1/embeddings", {"input": text}).json()["data"][0]["embedding"]
        src = tmp_path / "one.jsonl"
        src.write_text(json.dumps(text) + "\n")
        r = subprocess.run([kiln_bin(), "embed", "-m", str(CASE / "model"), "-f", str(src),
                            "--json-lines", "--precision", "f32"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        # Both print float32 values, kiln embed with 9 digits: equal as float32.
        assert np.array_equal(np.float32(got), np.float32(json.loads(r.stdout.splitlines()[0])))
        default = embedder.post("/v1/embeddings", {"input": text}).json()["data"][0]["embedding"]
        assert not np.array_equal(np.float32(got), np.float32(default))
    finally:
        s.stop()
    r = subprocess.run([kiln_bin(), "serve", "-m", str(CASE / "model"), "--port", "0",
                        "--encoder-precision", "fp8"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "bf16 or f32" in r.stderr, r.stderr
