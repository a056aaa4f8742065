"""Constrained decoding for JSON against `kiln serve` on the tiny random-weight Gemma 3: with the
official `openai` client (response_format json_object / json_schema) and SGLang's
sampling_params.json_schema. A random-weight model never writes JSON by itself, so every
completion that ends with finish_reason "stop" parsing with json.loads and validating with the
`jsonschema` package (an oracle kiln did not write) shows the constraint at work.
"""
import json

import jsonschema
import openai
import pytest

# A schema whose values are all bounded (booleans, enums, nested closed objects): the random
# model must reach the end of the value, after which end of sequence is its only choice, so
# every completion finishes with "stop" well before max_tokens.
BOUNDED = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "color": {"enum": ["red", "green", "blue"]},
        "size": {"enum": [1, 12, 123]},
        "note": {"type": "null"},
        "inner": {"type": "object", "properties": {"flag": {"type": "boolean"}},
                  "required": ["flag"], "additionalProperties": False},
        "list": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    },
    "required": ["ok", "color", "inner"],
    "additionalProperties": False,
}
# Unbounded values (free strings, numbers, nested arrays): outputs may run into max_tokens.
OPEN = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "score": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
MAX_TOKENS = 400


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def model_id(client):
    return client.models.list().data[0].id


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "t", "schema": schema, "strict": True}}


def check(text, schema):
    value = json.loads(text)
    jsonschema.validate(value, schema)
    return value


def test_bounded_schema_always_completes_and_validates(client, model_id):
    # Greedy and sampled, n > 1: every choice is a complete valid value.
    for temperature, n in ((0, 1), (1.0, 6)):
        r = client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": "Describe a thing."}],
            response_format=schema_format(BOUNDED), temperature=temperature, n=n, seed=5,
            max_tokens=MAX_TOKENS)
        assert len(r.choices) == n
        for ch in r.choices:
            assert ch.finish_reason == "stop", ch.message.content
            check(ch.message.content, BOUNDED)
    # The sampled choices differ: the constraint narrows the choice, it does not fix it.
    assert len({ch.message.content for ch in r.choices}) > 1


def test_string_lengths_hold_in_sampled_output(client, model_id):
    # A random-weight model samples strings of every length: each choice must stop inside the
    # limits (jsonschema counts characters as kiln does), and sampling must actually reach them.
    schema = {"type": "object", "properties": {
        "code": {"type": "string", "minLength": 3, "maxLength": 5},
        "note": {"type": "string", "maxLength": 2}}, "required": ["code", "note"],
        "additionalProperties": False}
    r = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "Give a code."}],
        response_format=schema_format(schema), temperature=1.0, n=8, seed=11,
        max_tokens=MAX_TOKENS)
    lengths = []
    for ch in r.choices:
        assert ch.finish_reason == "stop", ch.message.content
        value = check(ch.message.content, schema)
        lengths.append(len(value["code"]))
    assert max(lengths) == 5 or min(lengths) == 3, lengths  # the limits were met, not avoided


def test_streaming_completions_route(client, model_id):
    # The client's completions.create has no response_format argument: it goes in extra_body.
    stream = client.completions.create(model=model_id, prompt="JSON:", stream=True, n=2,
                                       temperature=1.0, seed=9, max_tokens=MAX_TOKENS,
                                       extra_body={"response_format": schema_format(BOUNDED)})
    texts, reasons = ["", ""], [None, None]
    for chunk in stream:
        for ch in chunk.choices:
            texts[ch.index] += ch.text
            reasons[ch.index] = ch.finish_reason or reasons[ch.index]
    for text, reason in zip(texts, reasons):
        assert reason == "stop", text
        check(text, BOUNDED)


def test_open_schema_stops_validate_and_truncations_say_length(client, model_id):
    r = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "A person, please."}],
        response_format=schema_format(OPEN), temperature=1.0, n=8, seed=11, max_tokens=60)
    reasons = [ch.finish_reason for ch in r.choices]
    assert set(reasons) <= {"stop", "length"}
    for ch in r.choices:
        if ch.finish_reason == "stop":
            check(ch.message.content, OPEN)
        else:
            assert r.usage is not None
    # A tight max_tokens truncates: finish_reason "length", never a fake "stop". (4 tokens of at
    # most 15 bytes could hold BOUNDED's shortest value, 47 bytes; 3 could not, and are refused
    # before generating: test_hostile_requests.py.)
    short = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "x"}],
        response_format=schema_format(BOUNDED), temperature=0, max_tokens=4)
    assert short.choices[0].finish_reason == "length"
    assert short.usage.completion_tokens == 4


def test_json_object_mode(client, model_id):
    r = client.chat.completions.create(
        model=model_id, messages=[{"role": "user", "content": "Reply in JSON."}],
        response_format={"type": "json_object"}, temperature=1.0, n=8, seed=3, max_tokens=80)
    stops = [ch for ch in r.choices if ch.finish_reason == "stop"]
    for ch in stops:
        assert isinstance(json.loads(ch.message.content), dict)
    for ch in r.choices:  # whatever the finish, the text starts an object
        assert ch.message.content.startswith("{"), ch.message.content


def test_sglang_native_json_schema(server):
    out = server.generate({"text": ["a", "b"], "sampling_params": {
        "json_schema": json.dumps(BOUNDED), "temperature": 1.0, "n": 2,
        "max_new_tokens": MAX_TOKENS}})
    assert len(out) == 4
    for o in out:
        assert o["meta_info"]["finish_reason"]["type"] == "stop", o["text"]
        check(o["text"], BOUNDED)


def test_stop_strings_still_apply(client, model_id):
    # A stop string ends the output where it matches, as without a constraint (the text is then
    # cut inside the value, which the client asked for); the rest finish with a valid value.
    r = client.completions.create(model=model_id, prompt="JSON:", n=6, temperature=1.0, seed=2,
                                  max_tokens=MAX_TOKENS, stop=["green"],
                                  extra_body={"response_format": schema_format(BOUNDED)})
    for ch in r.choices:
        assert ch.finish_reason == "stop"
        assert "green" not in ch.text
        if not ch.text.endswith('"'):
            check(ch.text, BOUNDED)


def test_numeric_bounds_hold_in_sampled_output(client, model_id):
    # minimum / maximum and their exclusive forms, on integers and numbers: a random-weight model
    # samples digits freely, so each bound is met by the constraint, not by the model; jsonschema
    # checks every sampled value, over several seeds.
    schema = {"type": "object", "properties": {
        "age": {"type": "integer", "minimum": 18, "maximum": 99},
        "delta": {"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 5},
        "score": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "price": {"type": "number", "minimum": 10.5, "exclusiveMaximum": 12.25}},
        "required": ["age", "delta", "score", "price"], "additionalProperties": False}
    values = []
    for seed in (1, 2, 3, 4):
        r = client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": "Numbers."}],
            response_format=schema_format(schema), temperature=1.0, n=6, seed=seed,
            max_tokens=MAX_TOKENS)
        for ch in r.choices:
            assert ch.finish_reason == "stop", ch.message.content
            values.append(check(ch.message.content, schema))
    # Sampling really explores the ranges rather than settling on one value.
    assert len({v["age"] for v in values}) > 3 and len({v["delta"] for v in values}) > 2
    assert any(v["score"] != 1 for v in values)


# Every format kiln enforces is checked by jsonschema's draft 2020-12 format checker (the
# generic FormatChecker() reads "time" as draft 3 did, without fraction or offset); date-time
# and time only when rfc3339-validator is installed (scripts/requirements.txt), otherwise the
# checker would pass anything: the test makes sure it is there.
FORMATS = ("date", "time", "date-time", "uuid", "email", "ipv4", "ipv6")


def format_checker():
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    missing = [f for f in FORMATS if f not in checker.checkers]
    assert not missing, f"jsonschema cannot check {missing}"
    return checker


def sampled_values(client, model_id, schema, seeds=(1, 2, 3), n=6, max_tokens=800):
    """Sampled choices over several seeds; each one that finished validates (formats too)."""
    values, stopped = [], 0
    for seed in seeds:
        r = client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": "Fill it in."}],
            response_format=schema_format(schema), temperature=1.0, n=n, seed=seed,
            max_tokens=max_tokens)
        for ch in r.choices:
            if ch.finish_reason != "stop":
                continue
            stopped += 1
            value = json.loads(ch.message.content)
            jsonschema.validate(value, schema, format_checker=format_checker())
            values.append(value)
    assert stopped >= len(seeds) * n // 2, f"only {stopped} choices finished"
    return values


def test_patterns_hold_in_sampled_output(client, model_id):
    # A random-weight model samples any allowed token, so each pattern is met by the
    # constraint, not by the model; unanchored patterns may have anything around them.
    schema = {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{2,3}-\\d{2,4}$"},
        "hex": {"type": "string", "pattern": "^(0x)?[0-9a-f]{1,6}$"},
        "word": {"type": "string", "pattern": "^(red|green|blue)(-[a-z])?$"},
        "mark": {"type": "string", "pattern": "ok", "maxLength": 6},
        "zip": {"type": "string", "pattern": "^\\d{5}$"}},
        "required": ["code", "hex", "word", "mark", "zip"], "additionalProperties": False}
    values = sampled_values(client, model_id, schema)
    # Sampling explores the language rather than settling on one string.
    assert len({v["code"] for v in values}) > 3 and len({v["hex"] for v in values}) > 3
    assert any(len(v["mark"]) > 2 for v in values)  # text around the unanchored "ok"


def test_formats_hold_in_sampled_output(client, model_id):
    for fmt in FORMATS:
        schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}},
                  "required": ["v"], "additionalProperties": False}
        values = sampled_values(client, model_id, schema, seeds=(1, 2), n=6)
        assert len({v["v"] for v in values}) > 2, (fmt, values)


def test_bad_schemas_get_a_400_naming_the_field(client, model_id, server):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": "x"}], max_tokens=4,
            response_format=schema_format({"type": "object", "properties": {
                "name": {"type": "string", "pattern": "(a)\\1"}}}))
    assert e.value.body["param"] == "response_format.json_schema.schema.properties.name.pattern"
    assert "backreference (not supported)" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": "x"}], max_tokens=4,
            response_format=schema_format({"type": "string", "format": "uri"}))
    assert e.value.body["param"] == "response_format.json_schema.schema.format"
    assert "supported: date, time, date-time, uuid, email, ipv4, ipv6" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model_id, prompt="x", max_tokens=4,
                                  extra_body={"response_format": {"type": "yaml"}})
    assert e.value.body["param"] == "response_format.type"
    r = server.post("/generate", {"text": "x", "sampling_params": {
        "json_schema": json.dumps({"type": "integer", "multipleOf": 3})}})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "sampling_params.json_schema.multipleOf"


def spec_counter(server, name):
    import urllib.request
    text = urllib.request.urlopen(server.url + "/metrics", timeout=30).read().decode()
    return int(float([l for l in text.splitlines() if l.startswith(name + " ")][0].split()[1]))


def test_speculative_proposals_obey_the_constraint(server_factory, gemma):
    """With a draft model (the tiny model drafting for itself, unconstrained), proposals that
    break the schema have probability 0 under the constraint and are never kept: greedy and
    sampled choices validate, and proposals were made and verified."""
    spec = server_factory(gemma, "--graph-mode", "optimize", "--speculative-algorithm",
                          "standalone", "--speculative-draft-model-path", str(gemma),
                          name="speculative-json")
    c = openai.OpenAI(base_url=spec.url + "/v1", api_key="unused", max_retries=0)
    mid = c.models.list().data[0].id
    for temperature, n in ((0, 1), (1.0, 4)):
        for schema in (BOUNDED, OPEN):
            r = c.chat.completions.create(
                model=mid, messages=[{"role": "user", "content": "Describe a thing."}],
                response_format=schema_format(schema), temperature=temperature, n=n, seed=7,
                max_tokens=MAX_TOKENS)
            for ch in r.choices:
                if ch.finish_reason == "stop":
                    check(ch.message.content, schema)
                else:
                    assert schema is OPEN and ch.finish_reason == "length"
    assert spec_counter(spec, "kiln_spec_proposed_tokens_total") > 0
    assert spec_counter(spec, "kiln_spec_verify_steps_total") > 0
