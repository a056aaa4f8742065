"""OpenAI tool calling through `kiln serve`, with the official `openai` client, on the tiny
random-weight Qwen2 carrying Qwen 2.5's real chat template (its tool format), and the tiny Llama
and Mistral carrying Llama 3.1's and Mistral Nemo's. A random model
never writes a tool call by itself, so every forced call (tool_choice "required" or a named
function) that parses and whose arguments validate with the `jsonschema` package (an oracle kiln
did not write), over many seeds at temperature 1, shows the call constraint at work. The prompt
kiln renders is checked against the same template rendered by jinja2 (token counts through
/tokenize), and the stream is assembled by the client's own ChatCompletionStreamState.
"""
import json
import pathlib
import sys

import jsonschema
import openai
import pytest
from gguf_variant import write_variant
from openai.lib.streaming.chat import ChatCompletionStreamState

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIXTURES))
import make_chat_template_cases as cases  # noqa: E402

QWEN25 = (FIXTURES / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text(encoding="utf-8")

# Bounded values only (short strings, enums, integer ranges, short arrays), so that a random
# model reaches the end of every call well before max_tokens.
WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 8},
                          "unit": {"enum": ["celsius", "fahrenheit"]},
                          "days": {"type": "integer", "minimum": 1, "maximum": 7}},
           "required": ["city", "days"], "additionalProperties": False}
LOOKUP = {"type": "object",
          "properties": {"ids": {"type": "array", "items": {"type": "integer", "minimum": 0,
                                                            "maximum": 99},
                                 "minItems": 1, "maxItems": 3},
                         "exact": {"type": "boolean"},
                         "mode": {"$ref": "#/$defs/mode"}},
          "required": ["ids", "mode"], "additionalProperties": False,
          "$defs": {"mode": {"enum": ["fast", "slow"]}}}
NOW = {"type": "object", "properties": {}, "additionalProperties": False}
SCHEMAS = {"get_weather": WEATHER, "lookup": LOOKUP, "now": NOW}
TOOLS = [{"type": "function", "function": {"name": name, "description": f"The {name} tool.",
                                           "parameters": schema}}
         for name, schema in SCHEMAS.items()]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
MAX_TOKENS = 2500


def serve_with_template(server_factory, models, tmp_path_factory, model, template, name,
                        *flags):
    """kiln serve (eager) on a tiny model whose chat template is replaced by `template`."""
    dst = tmp_path_factory.mktemp(name) / f"{model}-{name}.gguf"
    write_variant(models / f"{model}.gguf", dst, chat_template=template)
    return server_factory(dst, "--graph-mode", "off", *flags, name=name)


@pytest.fixture(scope="module")
def tool_server(server_factory, models, tmp_path_factory):
    # Written here rather than relying on tiny-qwen2's own template, which is the same file today.
    return serve_with_template(server_factory, models, tmp_path_factory, "tiny-qwen2", QWEN25,
                               "tools", "--context-length", "8192")


@pytest.fixture(scope="module")
def client(tool_server):
    return openai.OpenAI(base_url=tool_server.url + "/v1", api_key="unused", max_retries=0)


@pytest.fixture(scope="module")
def model_id(client):
    return client.models.list().data[0].id


def check_call(call, allowed):
    assert call.type == "function"
    assert call.id.startswith("call_")
    assert call.function.name in allowed, call
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, SCHEMAS[call.function.name])
    return call.function.name, args


def test_required_call_parses_and_validates_over_many_seeds(client, model_id):
    names = set()
    for seed in range(6):
        r = client.chat.completions.create(model=model_id, messages=ASK, tools=TOOLS,
                                           tool_choice="required", temperature=1.0, seed=seed,
                                           n=3, max_tokens=MAX_TOKENS)
        for ch in r.choices:
            assert ch.finish_reason == "tool_calls", ch
            assert ch.message.content is None
            assert len(ch.message.tool_calls) == 1
            names.add(check_call(ch.message.tool_calls[0], SCHEMAS)[0])
    # The model picks among the tools: the constraint follows the one it names.
    assert len(names) >= 2, names


def test_named_call_uses_only_that_function(client, model_id):
    for seed in range(5):
        r = client.chat.completions.create(
            model=model_id, messages=ASK, tools=TOOLS, temperature=1.0, seed=100 + seed, n=2,
            tool_choice={"type": "function", "function": {"name": "lookup"}},
            max_tokens=MAX_TOKENS)
        for ch in r.choices:
            assert ch.finish_reason == "tool_calls"
            (call,) = ch.message.tool_calls
            assert check_call(call, {"lookup"})[0] == "lookup"


def test_streamed_call_assembles_as_the_whole_reply(client, model_id):
    for seed, choice in enumerate(["required"] * 2 + [
            {"type": "function", "function": {"name": "lookup"}}] * 2):
        kw = dict(model=model_id, messages=ASK, tools=TOOLS, tool_choice=choice,
                  temperature=1.0, seed=seed, max_tokens=MAX_TOKENS, n=2)
        wholes = client.chat.completions.create(**kw).choices
        state = ChatCompletionStreamState(input_tools=TOOLS)
        fragments = 0
        for chunk in client.chat.completions.create(stream=True, **kw):
            state.handle_chunk(chunk)
            for ch in chunk.choices:
                assert not ch.delta.content, "call text leaked into delta.content"
                for c in ch.delta.tool_calls or []:
                    fragments += bool(c.function.arguments)
        if choice != "required":
            assert fragments >= 4  # lookup's arguments stream in pieces
        # Both choices (sample i uses seed + i) assemble to the non-streamed ones.
        for streamed, whole in zip(state.get_final_completion().choices, wholes, strict=True):
            assert streamed.finish_reason == "tool_calls"
            (call,) = streamed.message.tool_calls
            (want,) = whole.message.tool_calls
            assert check_call(call, SCHEMAS) == check_call(want, SCHEMAS)
            assert call.function.arguments == want.function.arguments


def test_multi_turn_with_a_tool_result(client, model_id):
    first = client.chat.completions.create(model=model_id, messages=ASK, tools=TOOLS,
                                           tool_choice="required", seed=3, max_tokens=MAX_TOKENS)
    msg = first.choices[0].message
    (call,) = msg.tool_calls
    history = ASK + [msg.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "21 degrees, sunny"}]
    second = client.chat.completions.create(
        model=model_id, messages=history, tools=TOOLS, temperature=1.0, seed=4,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=MAX_TOKENS)
    (call2,) = second.choices[0].message.tool_calls
    check_call(call2, {"get_weather"})
    # auto on a random model: whatever it writes comes back as text or parsed calls.
    third = client.chat.completions.create(model=model_id, messages=history, tools=TOOLS,
                                           max_tokens=8)
    assert third.choices[0].finish_reason in ("length", "stop", "tool_calls")


def rendered_prompt_tokens(server, messages, tools):
    text = cases.environment().from_string(QWEN25).render(
        messages=messages, tools=tools, add_generation_prompt=True, bos_token="",
        eos_token="<|im_end|>")
    r = server.post("/tokenize", {"prompt": text})
    assert r.status_code == 200, r.text
    return r.json()["count"]


def test_prompt_is_the_template_rendered_by_jinja2(tool_server, client, model_id):
    # Tool definitions with keys in a non-sorted order and non-ASCII text, a call in the history
    # (its arguments string re-encoded as the template's tojson writes it) and two results.
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER,
                                               "description": "Météo \"now\"\nline two"}}]
    messages = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"days":2,"city":"Paris"}'}},
            {"id": "call_b", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Lyon", "days": 1.5e0}'}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
        {"role": "user", "content": "And tomorrow?"}]
    jinja_messages = json.loads(json.dumps(messages))
    for m in jinja_messages:  # as transformers-based servers pass them: arguments decoded
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    want = rendered_prompt_tokens(tool_server, jinja_messages, tools)
    r = client.chat.completions.create(model=model_id, messages=messages, tools=tools,
                                       max_tokens=1)
    assert r.usage.prompt_tokens == want
    # The same without tools: the plain system prompt, and the history still renders.
    want = rendered_prompt_tokens(tool_server, jinja_messages, None)
    r = client.chat.completions.create(model=model_id, messages=messages, max_tokens=1)
    assert r.usage.prompt_tokens == want


def test_none_renders_tools_but_reads_no_calls(tool_server, client, model_id):
    r = client.chat.completions.create(model=model_id, messages=ASK, tools=TOOLS,
                                       tool_choice="none", max_tokens=16, seed=1)
    ch = r.choices[0]
    assert ch.message.tool_calls is None and ch.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == rendered_prompt_tokens(tool_server, ASK, TOOLS)


def bad_request(client, model_id, **kw):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id, max_tokens=4, **kw)
    return e.value.body


def test_bad_requests_name_the_field(client, model_id):
    body = bad_request(client, model_id, messages=ASK, tools=TOOLS,
                       tool_choice={"type": "function", "function": {"name": "fly"}})
    assert body["param"] == "tool_choice.function.name"
    assert "'fly' is not one of the request's tools (get_weather, lookup, now)" in body["message"]
    body = bad_request(client, model_id, messages=ASK + [{"role": "tool", "content": "x"}],
                       tools=TOOLS)
    assert body["param"] == "messages[1].tool_call_id"
    body = bad_request(client, model_id, tools=TOOLS, messages=ASK + [
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                              "function": {"name": "now", "arguments": "{x"}}]}])
    assert body["param"] == "messages[1].tool_calls[0].function.arguments"
    body = bad_request(client, model_id, messages=ASK, tool_choice="required", tools=[
        {"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"}}}}}])
    assert body["param"] == "tools[0].function.parameters.properties.a.pattern"
    body = bad_request(client, model_id, messages=ASK, tools=[{"type": "function"}])
    assert body["param"] == "tools[0].function"


def test_patterned_tool_arguments_validate(client, model_id):
    # The same keywords in a tool's parameters: a forced call's arguments validate.
    params = {"type": "object", "properties": {
        "when": {"type": "string", "format": "date"},
        "room": {"type": "string", "pattern": "^[A-D][0-9]{3}$"}},
        "required": ["when", "room"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "book", "parameters": params}}]
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    assert "date" in checker.checkers
    rooms = set()
    for seed in range(4):
        r = client.chat.completions.create(
            model=model_id, messages=[{"role": "user", "content": "Book a room."}], tools=tools,
            tool_choice="required", temperature=1.0, seed=seed, max_tokens=MAX_TOKENS)
        ch = r.choices[0]
        assert ch.finish_reason == "tool_calls", ch
        for call in ch.message.tool_calls:
            args = json.loads(call.function.arguments)
            jsonschema.validate(args, params, format_checker=checker)
            rooms.add(args["room"])
    assert len(rooms) > 1


def test_native_generate_refuses_tools_and_says_where_they_work(tool_server):
    for name, value in (("tools", TOOLS), ("tool_choice", "auto")):
        r = tool_server.post("/generate", {"text": "x", name: value})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["param"] == name
        assert "/v1/chat/completions" in error["message"]


@pytest.fixture(scope="module")
def llama_server(server_factory, models):
    # tiny-llama carries Llama 3.1's template (its JSON tool calls).
    return server_factory(models / "tiny-llama.gguf", "--graph-mode", "off",
                          "--context-length", "8192", name="llama-tools")


@pytest.fixture(scope="module")
def llama_client(llama_server):
    return openai.OpenAI(base_url=llama_server.url + "/v1", api_key="unused", max_retries=0)


def test_llama31_json_calls_are_forced_and_validate(llama_server, llama_client):
    model_id = llama_client.models.list().data[0].id
    for seed, choice in enumerate(["required", "required",
                                   {"type": "function", "function": {"name": "lookup"}}]):
        kw = dict(model=model_id, messages=ASK, tools=TOOLS, tool_choice=choice, seed=seed,
                  temperature=1.0, max_tokens=MAX_TOKENS)
        r = llama_client.chat.completions.create(**kw)
        assert r.choices[0].finish_reason == "tool_calls"
        (call,) = r.choices[0].message.tool_calls
        name, _ = check_call(call, SCHEMAS if choice == "required" else {"lookup"})
        state = ChatCompletionStreamState(input_tools=TOOLS)
        for chunk in llama_client.chat.completions.create(stream=True, **kw):
            state.handle_chunk(chunk)
        (streamed,) = state.get_final_completion().choices[0].message.tool_calls
        assert streamed.function.arguments == call.function.arguments
    # A tool result goes back as an ipython turn; the next call is forced again.
    history = ASK + [r.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "found 3"}]
    r = llama_client.chat.completions.create(model=model_id, messages=history, tools=TOOLS,
                                             tool_choice="required", seed=9, max_tokens=MAX_TOKENS)
    check_call(r.choices[0].message.tool_calls[0], SCHEMAS)
    # The prompt is Llama 3.1's template rendered by jinja2 (tools in the first user turn).
    llama31 = (FIXTURES / "chat_templates" / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text(
        encoding="utf-8")
    jinja_history = json.loads(json.dumps(history))
    for c in jinja_history[1]["tool_calls"]:
        c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    text = cases.environment().from_string(llama31).render(
        messages=jinja_history, tools=TOOLS, add_generation_prompt=True, bos_token="")
    want = llama_server.post("/tokenize", {"prompt": text}).json()["count"]
    r = llama_client.chat.completions.create(model=model_id, messages=history, tools=TOOLS,
                                             max_tokens=1)
    assert r.usage.prompt_tokens == want


MISTRAL_V7 = (FIXTURES / "chat_templates" / "mistralai-Mistral-Large-Instruct-2411.jinja").read_text(
    encoding="utf-8")


@pytest.fixture(scope="module")
def mistral_v7_client(server_factory, models, tmp_path_factory):
    # Mistral Large 2411's template (mistral-v7) writes no tool format.
    server = serve_with_template(server_factory, models, tmp_path_factory, "tiny-mistral",
                                 MISTRAL_V7, "mistral-v7-tools")
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def test_template_without_a_tool_format_refuses_tools(mistral_v7_client):
    client = mistral_v7_client
    model_id = client.models.list().data[0].id
    body = bad_request(client, model_id, messages=ASK, tools=TOOLS)
    assert body["param"] == "tools"
    assert "(mistral-v7) has no tool-call format" in body["message"], body
    # A tool result in the history is refused the same way, and plain chat still works.
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=model_id, max_tokens=4, messages=ASK + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "12:00"}])
    r = client.chat.completions.create(model=model_id, messages=ASK, max_tokens=4)
    assert r.choices[0].message.tool_calls is None


# Mistral's [TOOL_CALLS] format, on the tiny random-weight Mistral carrying Mistral Nemo's
# template. Its small vocabulary has no [TOOL_CALLS] token (real Mistral vocabularies do, as a
# control token): here the marker is plain text, tokenized piece by piece, in the prompt of a
# forced call as in the history.
NEMO = (FIXTURES / "chat_templates" / "mistralai-Mistral-Nemo-Instruct-2407.jinja").read_text(
    encoding="utf-8")


@pytest.fixture(scope="module")
def nemo_server(server_factory, models, tmp_path_factory):
    return serve_with_template(server_factory, models, tmp_path_factory, "tiny-mistral", NEMO,
                               "nemo-tools", "--context-length", "8192")


@pytest.fixture(scope="module")
def nemo_client(nemo_server):
    return openai.OpenAI(base_url=nemo_server.url + "/v1", api_key="unused", max_retries=0)


def nemo_prompt_tokens(server, messages, tools):
    """The prompt jinja2 renders from Nemo's template for the messages as a transformers-based
    server passes them (arguments decoded, ids mapped as kiln maps them), counted by /tokenize."""
    jinja_messages = json.loads(json.dumps(messages))
    for m in jinja_messages:
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    text = cases.environment().from_string(NEMO).render(
        messages=cases.with_mistral_ids(jinja_messages), tools=tools, add_generation_prompt=True,
        bos_token="", eos_token="</s>")
    r = server.post("/tokenize", {"prompt": text})
    assert r.status_code == 200, r.text
    return r.json()["count"]


def test_mistral_forced_calls_parse_and_validate(nemo_client):
    client = nemo_client
    model_id = client.models.list().data[0].id
    names, counts = set(), set()
    for seed in range(5):
        r = client.chat.completions.create(model=model_id, messages=ASK, tools=TOOLS,
                                           tool_choice="required", temperature=1.0, seed=seed,
                                           n=2, max_tokens=MAX_TOKENS)
        for ch in r.choices:
            assert ch.finish_reason == "tool_calls", ch
            assert ch.message.content is None
            assert ch.message.tool_calls, ch
            counts.add(len(ch.message.tool_calls))
            for call in ch.message.tool_calls:
                names.add(check_call(call, SCHEMAS)[0])
    assert len(names) >= 2, names
    # parallel_tool_calls false: the array holds one call; a named function: only that one.
    for seed in range(3):
        r = client.chat.completions.create(
            model=model_id, messages=ASK, tools=TOOLS, temperature=1.0, seed=20 + seed,
            parallel_tool_calls=False, max_tokens=MAX_TOKENS,
            tool_choice={"type": "function", "function": {"name": "lookup"}})
        (call,) = r.choices[0].message.tool_calls
        check_call(call, {"lookup"})


def test_mistral_parallel_calls_and_stream(nemo_client):
    client = nemo_client
    model_id = client.models.list().data[0].id
    several = 0
    for seed in range(4):
        kw = dict(model=model_id, messages=ASK, tools=TOOLS, tool_choice="required",
                  temperature=1.0, seed=40 + seed, max_tokens=MAX_TOKENS)
        whole = client.chat.completions.create(**kw).choices[0]
        state = ChatCompletionStreamState(input_tools=TOOLS)
        for chunk in client.chat.completions.create(stream=True, **kw):
            state.handle_chunk(chunk)
            for ch in chunk.choices:
                assert not ch.delta.content, "call text leaked into delta.content"
        streamed = state.get_final_completion().choices[0]
        assert streamed.finish_reason == "tool_calls"
        assert len(streamed.message.tool_calls) == len(whole.message.tool_calls)
        for got, want in zip(streamed.message.tool_calls, whole.message.tool_calls):
            assert check_call(got, SCHEMAS) == check_call(want, SCHEMAS)
            assert got.function.arguments == want.function.arguments
        several += len(whole.message.tool_calls) > 1
    # A random model ends the array early or late: some replies hold several calls.
    assert several >= 1


def test_mistral_multi_turn_prompt_is_the_template(nemo_server, nemo_client):
    client = nemo_client
    model_id = client.models.list().data[0].id
    first = client.chat.completions.create(model=model_id, messages=ASK, tools=TOOLS,
                                           tool_choice="required", seed=3, max_tokens=MAX_TOKENS)
    msg = first.choices[0].message
    history = ASK + [msg.model_dump(exclude_none=True)] + [
        {"role": "tool", "tool_call_id": c.id, "content": f"result {i}"}
        for i, c in enumerate(msg.tool_calls)]
    # kiln's call_... ids become the 9 characters the template takes, the same for the call and
    # its result: the prompt is Nemo's template rendered by jinja2 with the ids mapped so.
    want = nemo_prompt_tokens(nemo_server, history, TOOLS)
    r = client.chat.completions.create(model=model_id, messages=history, tools=TOOLS,
                                       max_tokens=1)
    assert r.usage.prompt_tokens == want
    second = client.chat.completions.create(
        model=model_id, messages=history, tools=TOOLS, temperature=1.0, seed=4,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=MAX_TOKENS)
    for call in second.choices[0].message.tool_calls:
        check_call(call, {"get_weather"})
    # auto on a random model: whatever it writes comes back as text or parsed calls.
    third = client.chat.completions.create(model=model_id, messages=history, tools=TOOLS,
                                           max_tokens=8)
    assert third.choices[0].finish_reason in ("length", "stop", "tool_calls")
    # A system message and the tools with no call yet.
    messages = [{"role": "system", "content": "Be brief."}] + ASK
    r = client.chat.completions.create(model=model_id, messages=messages, tools=TOOLS,
                                       max_tokens=1)
    assert r.usage.prompt_tokens == nemo_prompt_tokens(nemo_server, messages, TOOLS)


def test_mistral_bad_requests_name_the_field(nemo_client):
    client = nemo_client
    model_id = client.models.list().data[0].id
    call = {"id": "call_x", "type": "function", "function": {"name": "now", "arguments": "{}"}}
    body = bad_request(client, model_id, tools=TOOLS, messages=ASK + [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "12:00"}])
    assert body["param"] == "messages[2].tool_call_id"
    body = bad_request(client, model_id, tools=TOOLS, messages=ASK + [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_y", "content": "12:00"}])
    assert body["param"] == "messages[2].tool_call_id"
    body = bad_request(client, model_id, tools=TOOLS, messages=ASK + [
        {"role": "assistant", "content": None, "tool_calls": [
            dict(call, function={"name": "now", "arguments": "{x"})]}])
    assert body["param"] == "messages[1].tool_calls[0].function.arguments"
    # As the template raises: after a tool result the assistant answers before the user speaks.
    body = bad_request(client, model_id, tools=TOOLS, messages=ASK + [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_x", "content": "12:00"},
        {"role": "user", "content": "and?"}])
    assert "must alternate" in body["message"], body


QWEN3 = (FIXTURES / "chat_templates" / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def qwen3_server(server_factory, models, tmp_path_factory):
    return serve_with_template(server_factory, models, tmp_path_factory, "tiny-qwen3", QWEN3,
                               "qwen3-tools", "--context-length", "8192")


def test_qwen3_template_renders_tools_and_forces_calls(qwen3_server):
    client = openai.OpenAI(base_url=qwen3_server.url + "/v1", api_key="unused", max_retries=0)
    model_id = client.models.list().data[0].id
    messages = [{"role": "system", "content": "Be brief."}] + ASK + [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "now", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"}]
    text = cases.environment().from_string(QWEN3).render(
        messages=json.loads(json.dumps(messages).replace('"arguments": "{}"', '"arguments": {}')),
        tools=TOOLS, add_generation_prompt=True, bos_token="", eos_token="<|im_end|>")
    want = qwen3_server.post("/tokenize", {"prompt": text}).json()["count"]
    r = client.chat.completions.create(model=model_id, messages=messages, tools=TOOLS,
                                       max_tokens=1)
    assert r.usage.prompt_tokens == want
    for seed in range(3):
        r = client.chat.completions.create(model=model_id, messages=messages, tools=TOOLS,
                                           tool_choice="required", temperature=1.0, seed=seed,
                                           max_tokens=MAX_TOKENS)
        (call,) = r.choices[0].message.tool_calls
        check_call(call, SCHEMAS)
