"""OpenAI-compatible routes, driven by the official `openai` Python client."""
import openai
import pytest


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def model_id(client):
    models = client.models.list().data
    assert len(models) == 1
    return models[0].id


def test_completion(client, model_id, server):
    c = client.completions.create(model=model_id, prompt="Hello there", max_tokens=8,
                                  temperature=0, extra_body={"ignore_eos": True})
    assert c.object == "text_completion"
    assert c.choices[0].finish_reason == "length"
    assert c.usage.completion_tokens == 8
    assert c.usage.total_tokens == c.usage.prompt_tokens + 8
    native = server.generate({"text": "Hello there", "sampling_params": {
        "temperature": 0, "max_new_tokens": 8, "ignore_eos": True}})
    assert c.choices[0].text == native["text"]


def test_completion_stream_with_usage(client, model_id):
    whole = client.completions.create(model=model_id, prompt="Stream", max_tokens=8,
                                      temperature=0, extra_body={"ignore_eos": True})
    chunks = list(client.completions.create(model=model_id, prompt="Stream", max_tokens=8,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True}))
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert text == whole.choices[0].text
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 8


def test_completion_n_logprobs_and_stop(client, model_id):
    c = client.completions.create(model=model_id, prompt=["a", "b"], max_tokens=5, n=2,
                                  temperature=0.9, seed=3, logprobs=2,
                                  extra_body={"ignore_eos": True})
    assert len(c.choices) == 4
    assert [ch.index for ch in c.choices] == [0, 1, 2, 3]
    for ch in c.choices:
        assert len(ch.logprobs.tokens) == 5
        assert len(ch.logprobs.token_logprobs) == 5
        assert all(len(t) <= 2 for t in ch.logprobs.top_logprobs)
    again = client.completions.create(model=model_id, prompt=["a", "b"], max_tokens=5, n=2,
                                      temperature=0.9, seed=3, extra_body={"ignore_eos": True})
    assert [ch.text for ch in again.choices] == [ch.text for ch in c.choices]


def test_chat(client, model_id):
    r = client.chat.completions.create(model=model_id, max_tokens=10, temperature=0,
                                       messages=[{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "Hi!"}])
    msg = r.choices[0].message
    assert msg.role == "assistant" and isinstance(msg.content, str)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 5


def test_chat_stream_and_logprobs(client, model_id):
    kwargs = dict(model=model_id, max_tokens=10, temperature=0,
                  messages=[{"role": "user", "content": "Tell me"}])
    whole = client.chat.completions.create(**kwargs, logprobs=True, top_logprobs=2)
    lp = whole.choices[0].logprobs.content
    assert len(lp) == whole.usage.completion_tokens
    assert all(len(t.top_logprobs) == 2 for t in lp)
    chunks = list(client.chat.completions.create(**kwargs, stream=True,
                                                 stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_errors_are_openai_shaped(client, model_id, server):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model_id, prompt="x", max_tokens=-1)
    assert e.value.status_code == 400
    r = server.post("/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "messages[0].role" and err["type"] == "invalid_request_error"
    assert set(err) == {"message", "type", "param", "code"}


def test_logit_bias_steers_both_apis(client, model_id, server):
    params = {"temperature": 0, "max_new_tokens": 6, "ignore_eos": True}
    plain = server.generate({"text": "Hello there", "sampling_params": params})["output_ids"]
    # +100 on a token the model did not pick makes every greedy step pick it.
    forced = next(t for t in range(100, 200) if t not in plain)
    native = server.generate({"text": "Hello there", "sampling_params": {
        **params, "logit_bias": {str(forced): 100}}})
    assert native["output_ids"] == [forced] * 6
    # -100 on the model's own first choice moves the first token elsewhere.
    banned = server.generate({"text": "Hello there", "sampling_params": {
        **params, "logit_bias": {str(plain[0]): -100}}})["output_ids"]
    assert banned[0] != plain[0]
    # The official client sends the same field at the top level.
    c = client.completions.create(model=model_id, prompt="Hello there", max_tokens=6,
                                  temperature=0, logit_bias={str(forced): 100},
                                  extra_body={"ignore_eos": True})
    assert c.choices[0].text == native["text"]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model_id, prompt="x", max_tokens=2,
                                  logit_bias={"not-a-token": 1})
    assert "logit_bias" in str(e.value)
