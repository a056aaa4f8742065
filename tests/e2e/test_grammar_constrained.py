"""Grammar-constrained decoding against `kiln serve` on the tiny random-weight Gemma 3: llama.cpp's
`grammar` (GBNF) and SGLang's `ebnf` and `regex`, on /generate, /v1/completions and
/v1/chat/completions. A random-weight model never writes these languages by itself, so every
output sampled at temperature 1 that ends with finish_reason "stop" parsing with Lark (a parser
kiln did not write) under the same grammar, and every truncated one being a live prefix, shows
the constraint at work. Also: refusals name the rule, max_tokens too small ends with "length",
stop strings and streaming still apply, and speculative decoding and graph mode give the same
greedy output as plain eager decoding.
"""
import pathlib
import re

import openai
import pytest

from test_grammar_oracle import GRAMMARS, kiln_verdicts, lark_accepts, lark_parser

NAMES = ["arithmetic", "json_subset", "sql_select", "csv_row", "label_choice", "python_signature",
         "nested_brackets"]
REGEXES = [r"(yes|no|maybe)-[0-9]{2,4}", r"[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8})?\n",
           r"\d{3}-\d{4}", r"(ab|c)+\.?"]
MAX_TOKENS = 48


def grammar_text(name):
    return (GRAMMARS / f"{name}.gbnf").read_text()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def model_id(client):
    return client.models.list().data[0].id


def check_outputs(name, outputs):
    """outputs: (text, finish reason). Finished ones parse with Lark; truncated ones are live."""
    parser = lark_parser(grammar_text(name))
    truncated = [t for t, reason in outputs if reason == "length"]
    for text, reason in outputs:
        if reason == "stop":
            assert lark_accepts(parser, text), (name, text)
    if truncated:
        path = str(GRAMMARS / f"{name}.gbnf")
        verdicts = kiln_verdicts(["--grammar", path], truncated)
        for t in truncated:
            assert verdicts[t] in ("prefix", "accept"), (name, t)
    return sum(reason == "stop" for _, reason in outputs)


@pytest.mark.parametrize("name", NAMES)
def test_sampled_outputs_parse_with_lark(server, client, model_id, name):
    text = grammar_text(name)
    outputs = []
    # /generate with llama.cpp's field, then SGLang's ebnf on /generate and /v1/completions.
    for seed in (1, 2, 3):
        out = server.generate({"text": ["Write:", "Go"], "sampling_params": {
            "grammar" if seed != 2 else "ebnf": text, "temperature": 1.0, "n": 3, "seed": seed,
            "max_new_tokens": MAX_TOKENS}})
        outputs += [(o["text"], o["meta_info"]["finish_reason"]["type"]) for o in out]
    r = client.completions.create(model=model_id, prompt="Out:", n=4, temperature=1.0, seed=4,
                                  max_tokens=MAX_TOKENS, extra_body={"ebnf": text})
    outputs += [(ch.text, ch.finish_reason) for ch in r.choices]
    r = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "Answer."}], n=4, temperature=1.0,
        seed=5, top_p=0.9, frequency_penalty=0.5, max_tokens=MAX_TOKENS,
        extra_body={"grammar": text, "top_k": 50})
    outputs += [(ch.message.content, ch.finish_reason) for ch in r.choices]
    assert len(outputs) == 26
    finished = check_outputs(name, outputs)
    if name in ("label_choice",):  # bounded: every output ends well before max_tokens
        assert finished == len(outputs)


@pytest.mark.parametrize("pattern", REGEXES)
def test_regex_outputs_fullmatch(server, client, model_id, pattern):
    compiled = re.compile(pattern)
    out = server.generate({"text": "x", "sampling_params": {
        "regex": pattern, "temperature": 1.0, "n": 6, "seed": 3, "max_new_tokens": MAX_TOKENS}})
    r = client.completions.create(model=model_id, prompt="y", n=4, temperature=1.0, seed=9,
                                  max_tokens=MAX_TOKENS, extra_body={"regex": pattern})
    texts = [(o["text"], o["meta_info"]["finish_reason"]["type"]) for o in out]
    texts += [(ch.text, ch.finish_reason) for ch in r.choices]
    for text, reason in texts:
        if reason == "stop":
            assert compiled.fullmatch(text), (pattern, text)
        else:
            assert kiln_verdicts(["--regex", pattern], [text])[text] != "reject"


def test_streaming_and_stop_strings(server, client, model_id):
    text = grammar_text("arithmetic")
    body = {"model": model_id, "prompt": "calc", "temperature": 1.0, "seed": 11, "max_tokens": 32,
            "grammar": text}
    whole = server.post("/v1/completions", body).json()["choices"][0]["text"]
    events, done = server.stream("/v1/completions", dict(body, stream=True))
    assert done
    streamed = "".join(e["choices"][0]["text"] for e in events if e["choices"])
    assert streamed == whole
    # A stop string ends the output where it matches, as without a constraint.
    r = client.completions.create(model=model_id, prompt="calc", n=6, temperature=1.0, seed=2,
                                  max_tokens=32, stop=["+"], extra_body={"grammar": text})
    for ch in r.choices:
        assert "+" not in ch.text


def test_too_few_tokens_end_with_length(server, client, model_id):
    out = server.generate({"text": "x", "sampling_params": {
        "grammar": 'root ::= "a" [b-z]{40}', "temperature": 1.0, "max_new_tokens": 3}})
    assert out["meta_info"]["finish_reason"]["type"] == "length"
    r = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "hi"}], max_tokens=2,
        extra_body={"regex": "[a-z]{30,40}"})
    assert r.choices[0].finish_reason == "length"


@pytest.mark.parametrize("body,param,needle", [
    ({"grammar": "root ::= item\nitem ::= missing"}, "grammar", "undefined rule 'missing'"),
    ({"ebnf": "root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\""}, "ebnf",
     "rule 'expr' is left-recursive"),
    ({"grammar": "root ::=" + " \"a\"{0,9999}" * 12000}, "grammar", "needs more than"),
    ({"regex": "a(?=b)"}, "regex", "regex uses"),
    ({"regex": "a", "grammar": "root ::= \"a\""}, "grammar", "two constraints"),
])
def test_refusals_are_400s_naming_the_field_and_rule(server, model_id, body, param, needle):
    r = server.post("/generate", {"text": "x", "sampling_params": body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "sampling_params." + param
    assert needle in r.json()["error"]["message"]
    r = server.post("/v1/completions", dict(body, model=model_id, prompt="x"))
    assert r.status_code == 400 and r.json()["error"]["param"] == param
    r = server.post("/v1/chat/completions", dict(body, model=model_id,
                                                 messages=[{"role": "user", "content": "x"}]))
    assert r.status_code == 400 and needle in r.json()["error"]["message"]


def test_grammar_and_json_schema_together_are_refused(server, model_id):
    r = server.post("/v1/chat/completions", {
        "model": model_id, "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_object"}, "regex": "a+"})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "regex"
    assert "response_format" in r.json()["error"]["message"]
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    r = server.post("/v1/chat/completions", {
        "model": model_id, "messages": [{"role": "user", "content": "x"}], "tools": [tool],
        "tool_choice": "required", "grammar": "root ::= \"a\""})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "tool_choice"


def greedy_outputs(server):
    texts = []
    for name in ("arithmetic", "json_subset", "python_signature", "nested_brackets"):
        out = server.generate({"text": ["Go:", "A longer prompt here"], "sampling_params": {
            "grammar": grammar_text(name), "temperature": 0, "max_new_tokens": 40}})
        texts += [o["text"] for o in out]
    out = server.generate({"text": "r", "sampling_params": {
        "regex": REGEXES[1], "temperature": 0, "max_new_tokens": 40}})
    texts.append(out["text"])
    return texts


def test_graph_and_speculative_equal_plain_eager(server, server_factory, gemma):
    eager = server_factory(gemma, "--graph-mode", "off", name="eager-grammar")
    spec = server_factory(gemma, "--graph-mode", "optimize", "--speculative-algorithm",
                          "standalone", "--speculative-draft-model-path", str(gemma),
                          name="speculative-grammar")
    plain = greedy_outputs(eager)
    assert greedy_outputs(server) == plain  # graph mode
    assert greedy_outputs(spec) == plain
    text = spec.get("/metrics").text
    proposed = [l for l in text.splitlines() if l.startswith("kiln_spec_proposed_tokens_total ")]
    assert float(proposed[0].split()[1]) > 0
