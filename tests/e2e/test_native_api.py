"""SGLang-native routes of `kiln serve` on a tiny random-weight model."""
import pytest

GREEDY = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}


def test_health_and_info(server):
    assert server.get("/health").status_code == 200
    assert server.get("/health_generate").status_code == 200
    info = server.get("/get_model_info").json()
    assert info["is_generation"] is True
    assert info["model_path"].endswith("tiny-gemma3.gguf")
    assert info["context_length"] == 1024
    sinfo = server.get("/get_server_info").json()
    assert sinfo["graph_mode"] == "optimize"
    assert "version" in sinfo and "internal_states" in sinfo


def test_generate_shape(server):
    out = server.generate({"text": "Hello there", "sampling_params": GREEDY})
    meta = out["meta_info"]
    assert isinstance(out["text"], str)
    assert len(out["output_ids"]) == 12
    assert meta["finish_reason"] == {"type": "length", "length": 12}
    assert meta["completion_tokens"] == 12
    assert meta["prompt_tokens"] > 1
    assert meta["cached_tokens"] >= 0
    assert meta["e2e_latency"] > 0
    assert isinstance(meta["id"], str)


def test_text_and_input_ids_agree(server):
    ids = server.post("/tokenize", {"prompt": "Once upon a time"}).json()["tokens"]
    by_text = server.generate({"text": "Once upon a time", "sampling_params": GREEDY})
    by_ids = server.generate({"input_ids": ids, "sampling_params": GREEDY})
    assert by_text["output_ids"] == by_ids["output_ids"]
    assert by_text["text"] == by_ids["text"]
    assert server.post("/detokenize", {"tokens": by_ids["output_ids"]}).json()["text"] \
        == by_ids["text"]


def test_batch_returns_each_prompt_in_order(server):
    prompts = ["one", "two two", "three three three"]
    batch = server.generate({"text": prompts, "sampling_params": GREEDY})
    assert isinstance(batch, list) and len(batch) == 3
    for p, out in zip(prompts, batch):
        assert out["output_ids"] == server.generate({"text": p, "sampling_params": GREEDY})["output_ids"]
    ids_batch = server.generate({"input_ids": [[5, 6, 7], [8, 9]], "sampling_params": GREEDY})
    assert len(ids_batch) == 2


def test_stream_is_cumulative_and_matches_non_stream(server):
    body = {"text": "Streaming test", "sampling_params": GREEDY}
    whole = server.generate(body)
    events, done = server.stream("/generate", {**body, "stream": True})
    assert done
    assert len(events) >= 2
    for a, b in zip(events, events[1:]):
        assert b["text"].startswith(a["text"])  # SGLang streams the text so far, not deltas
        assert a["meta_info"]["finish_reason"] is None
    assert events[-1]["text"] == whole["text"]
    assert events[-1]["output_ids"] == whole["output_ids"]
    assert events[-1]["meta_info"]["finish_reason"]["type"] == "length"


def test_stop_string_split_across_tokens(server):
    """A stop string made of the end of one token and the start of the next is found, and the
    text ends right before it."""
    params = {"temperature": 0, "max_new_tokens": 24, "ignore_eos": True}
    events, _ = server.stream("/generate", {"text": "Stop me", "sampling_params": params,
                                            "stream": True})
    full = events[-1]["text"]
    # Token boundaries: where the cumulative text grew between events.
    bounds = sorted({len(e["text"]) for e in events})
    stop = None
    for b in bounds:
        if 1 <= b < len(full) and full[b - 1:b + 1].strip() == full[b - 1:b + 1]:
            stop = full[b - 1:b + 1]
            break
    if stop is None:
        pytest.skip(f"no two-character boundary in {full!r}")
    out = server.generate({"text": "Stop me", "sampling_params": {**params, "stop": [stop]}})
    assert out["text"] == full[:full.find(stop)]
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    # Streaming with the stop string never shows the withheld characters.
    events, done = server.stream("/generate", {"text": "Stop me", "stream": True,
                                               "sampling_params": {**params, "stop": stop}})
    assert done and all(stop not in e["text"] for e in events)
    assert events[-1]["text"] == out["text"]


def test_stop_token_ids(server):
    out = server.generate({"text": "abc", "sampling_params": GREEDY})
    tok = out["output_ids"][3]
    stopped = server.generate({"text": "abc", "sampling_params": {**GREEDY,
                                                                  "stop_token_ids": [tok]}})
    first = out["output_ids"].index(tok)
    assert stopped["output_ids"] == out["output_ids"][:first + 1]
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": tok}


def test_n_samples_and_seeds_reproducible(server):
    body = {"text": "Random", "sampling_params": {"temperature": 1.0, "max_new_tokens": 10,
                                                  "n": 3, "seed": 7, "ignore_eos": True}}
    a = server.generate(body)
    b = server.generate(body)
    assert isinstance(a, list) and len(a) == 3
    assert [x["output_ids"] for x in a] == [x["output_ids"] for x in b]
    # The n samples are not copies of one another (each gets its own seed).
    assert len({tuple(x["output_ids"]) for x in a}) > 1
    other = server.generate({**body, "sampling_params": {**body["sampling_params"], "seed": 8}})
    assert [x["output_ids"] for x in other] != [x["output_ids"] for x in a]


def test_logprobs(server):
    out = server.generate({"text": "Logprobs", "sampling_params": GREEDY,
                           "return_logprob": True, "top_logprobs_num": 3})
    meta = out["meta_info"]
    lps, tops = meta["output_token_logprobs"], meta["output_top_logprobs"]
    assert len(lps) == len(tops) == meta["completion_tokens"]
    for (lp, tok, _), top in zip(lps, tops):
        assert lp <= 0
        assert len(top) == 3
        assert [t[0] for t in top] == sorted((t[0] for t in top), reverse=True)
        assert top[0][1] == tok  # greedy: the chosen token is the most likely one
        assert top[0][0] == pytest.approx(lp, abs=1e-5)


def test_metrics_and_pages(server):
    server.generate({"text": "metrics", "sampling_params": GREEDY})
    m = server.metrics()
    assert m['kiln_requests_total{finish_reason="length"}'] >= 1
    assert m["kiln_time_to_first_token_seconds_count"] >= 1
    assert m["kiln_inter_token_latency_seconds_count"] >= 1
    assert m["kiln_generation_tokens_total"] >= 12
    assert m["kiln_graph_steps_total"] > 0  # graph mode replays decode steps
    server.assert_all_pages_free()


def test_prefix_cache(server):
    server.assert_all_pages_free()  # starts from an empty cache
    prefix = "The following is a long shared system prompt. " * 12
    first = server.generate({"text": prefix + "Question one?", "sampling_params": GREEDY})
    assert first["meta_info"]["cached_tokens"] == 0
    again = server.generate({"text": prefix + "Question one?", "sampling_params": GREEDY})
    assert again["meta_info"]["cached_tokens"] > 0
    assert again["output_ids"] == first["output_ids"]
    other = server.generate({"text": prefix + "Another question?", "sampling_params": GREEDY})
    assert other["meta_info"]["cached_tokens"] >= 32
    m = server.metrics()
    assert m["kiln_prefix_cache_hit_rate"] > 0
    server.assert_all_pages_free()
