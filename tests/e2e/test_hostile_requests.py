"""Requests built to take the server down: structure nested 10,000 to 100,000 deep through every
field that reaches a recursive walk, patterns with groups nested as deep, and schemas that cannot
be completed within the request. Each is refused with a 400 that names the field and the limit,
before any token is generated, and the server goes on serving. Before the nesting limit, one
60 kB chat request nested 30,000 deep killed the whole server (stack overflow).
"""
import json
import pathlib

import pytest
import requests
from gguf_variant import write_variant

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
QWEN25 = (FIXTURES / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")
DEPTHS = [10_000, 30_000, 100_000]
LIMIT = "128 levels"
ASK = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def tool_server(server_factory, models, tmp_path_factory):
    """The tiny Qwen2 with Qwen 2.5's chat template, whose tool format kiln constrains."""
    dst = tmp_path_factory.mktemp("hostile") / "tiny-qwen2-hostile.gguf"
    write_variant(models / "tiny-qwen2.gguf", dst, chat_template=QWEN25)
    return server_factory(dst, "--graph-mode", "off", name="hostile")


def post(server, path, body: bytes):
    return requests.post(server.url + path, data=body,
                         headers={"Content-Type": "application/json"}, timeout=60)


def nested(depth: int) -> str:
    """A JSON value `depth` arrays deep, as text (json.dumps would recurse)."""
    return "[" * depth + "]" * depth


def still_serves(server):
    r = post(server, "/v1/chat/completions",
             json.dumps({"messages": ASK, "max_tokens": 2}).encode())
    assert r.status_code == 200, r.text


def refused(r, param=None):
    assert r.status_code == 400, (r.status_code, r.text[:300])
    err = r.json()["error"]
    if param is not None:
        assert err["param"] == param, err
    return err["message"]


def tool(parameters_text: str, extra: str = "") -> str:
    return ('{"type": "function", "function": {"name": "f", "parameters": ' + parameters_text +
            extra + "}}")


@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_structure_in_every_field_is_refused(tool_server, depth):
    deep = nested(depth)
    chat = '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2'
    call_args = json.dumps(deep)  # a JSON string holding the nested value
    bodies = {
        # The whole body, anywhere in it.
        "body": (chat + ', "metadata": ' + deep + "}", None),
        # An assistant message's tool call arguments (a JSON string parsed on its own).
        "arguments": ('{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", '
                      '"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", '
                      '"arguments": ' + call_args + '}}]}], "tools": [' +
                      tool('{"type": "object"}') + '], "max_tokens": 2}',
                      "messages[1].tool_calls[0].function.arguments"),
        # An unknown member of a tool's function, and an unknown keyword in its parameters.
        "function member": (chat + ', "tools": [' + tool('{"type": "object"}', ', "x": ' + deep) +
                            "]}", None),
        "parameters keyword": (chat + ', "tools": [' +
                               tool('{"type": "object", "examples": ' + deep + "}") + "]}", None),
        # A response_format schema.
        "schema": (chat + ', "response_format": {"type": "json_schema", "json_schema": '
                   '{"name": "t", "schema": {"type": "array", "items": ' + deep + "}}}}", None),
    }
    for name, (body, param) in bodies.items():
        message = refused(post(tool_server, "/v1/chat/completions", body.encode()), param)
        assert LIMIT in message, (name, message)
    # SGLang's json_schema is JSON text inside a string.
    body = json.dumps({"text": "a", "sampling_params": {"max_new_tokens": 2,
                                                        "json_schema": deep}})
    assert LIMIT in refused(post(tool_server, "/generate", body.encode()),
                            "sampling_params.json_schema")
    # Groups nested as deep inside a pattern.
    schema = {"type": "string", "pattern": "(" * depth + "a" + ")" * depth}
    body = json.dumps({"messages": ASK, "max_tokens": 2, "response_format": {
        "type": "json_schema", "json_schema": {"name": "t", "schema": schema}}})
    message = refused(post(tool_server, "/v1/chat/completions", body.encode()),
                      "response_format.json_schema.schema.pattern")
    assert "128" in message, message
    still_serves(tool_server)


def test_nesting_at_the_limit_is_accepted(tool_server):
    # 128 levels in all: the body object, then 127 arrays under "metadata".
    body = '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "metadata": ' + \
        nested(127) + "}"
    r = post(tool_server, "/v1/chat/completions", body.encode())
    # metadata is an OpenAI field kiln does not read: what matters is that depth is no reason.
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert LIMIT not in r.json()["error"]["message"]
    body = body.replace(nested(127), nested(128))
    assert LIMIT in refused(post(tool_server, "/v1/chat/completions", body.encode()))


def chat_with_schema(server, schema, **kw):
    body = {"messages": ASK, "max_tokens": 16, "response_format": {
        "type": "json_schema", "json_schema": {"name": "t", "schema": schema}}, **kw}
    return post(server, "/v1/chat/completions", json.dumps(body).encode())


def test_schemas_that_cannot_be_completed_are_refused_before_generating(tool_server):
    # No number of at most 18 digits lies in (0, 1e-320]: this generated for ~0.8 s, then
    # answered 500 ("allows no token").
    message = refused(chat_with_schema(tool_server, {"type": "number", "exclusiveMinimum": 0,
                                                     "maximum": 1e-320}),
                      "response_format.json_schema.schema.minimum")
    assert "within the bounds" in message
    # The same streamed: still a 400, not a partial value ending in "abort".
    r = chat_with_schema(tool_server, {"type": "number", "exclusiveMinimum": 0,
                                       "maximum": 1e-320}, stream=True)
    refused(r)
    # A minLength no token budget can hold.
    message = refused(chat_with_schema(tool_server, {"type": "string", "minLength": 10**9}),
                      "max_tokens")
    assert "cannot hold the shortest value" in message
    message = refused(chat_with_schema(tool_server, {"type": "array", "minItems": 10**9}),
                      "max_tokens")
    # A narrow range that does hold a number is served.
    r = chat_with_schema(tool_server, {"type": "number", "minimum": 0.1, "maximum": 0.1})
    assert r.status_code == 200, r.text
    still_serves(tool_server)


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_a_tool_schema_that_does_not_compile_is_refused_whatever_the_choice(tool_server, choice):
    for params in ({"type": "foo"}, {"type": "number", "multipleOf": 3}):
        body = {"messages": ASK, "max_tokens": 2, "tool_choice": choice, "tools": [
            {"type": "function", "function": {"name": "ok", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "bad", "parameters": params}}]}
        r = post(tool_server, "/v1/chat/completions", json.dumps(body).encode())
        refused(r)
        assert r.json()["error"]["param"].startswith("tools[1].function.parameters"), r.text
