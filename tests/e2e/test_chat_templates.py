"""Chat on models whose chat template kiln does not render: `kiln serve` still starts and serves
completions; chat requests get a 400 naming the reason (no fallback to some other format)."""
import pathlib

import pytest
from gguf_variant import write_variant

TEMPLATES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates"


@pytest.fixture(scope="module")
def unknown_chat_server(server_factory, models, tmp_path_factory):
    dst = tmp_path_factory.mktemp("unknown-chat") / "tiny-llama-command-r.gguf"
    command_r = (TEMPLATES / "CohereForAI-c4ai-command-r-plus-tool_use.jinja").read_text(encoding="utf-8")
    write_variant(models / "tiny-llama.gguf", dst, chat_template=command_r)
    return server_factory(dst, "--graph-mode", "off", name="unknown-chat")


@pytest.fixture(scope="module")
def no_template_server(server_factory, models, tmp_path_factory):
    dst = tmp_path_factory.mktemp("no-chat") / "tiny-qwen2-no-template.gguf"
    write_variant(models / "tiny-qwen2.gguf", dst, chat_template="")
    return server_factory(dst, "--graph-mode", "off", name="no-chat")


def assert_chat_refused(server, reason):
    r = server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                             "max_tokens": 4})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["message"].startswith("chat is unavailable for this model: " + reason), err
    # Completions do not need the template.
    r = server.post("/v1/completions", {"prompt": "hi", "max_tokens": 4, "ignore_eos": True})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 4


def test_unknown_template_refuses_chat_only(unknown_chat_server):
    assert_chat_refused(unknown_chat_server, "the model's chat template is not one kiln renders")
    assert "chat requests will be refused" in unknown_chat_server.log()


def test_missing_template_refuses_chat_only(no_template_server):
    assert_chat_refused(no_template_server, "the model file has no chat template")


@pytest.mark.parametrize("template", ["CohereForAI-c4ai-command-r-plus.jinja",
                                      "deepseek-ai-DeepSeek-V2.jinja"])
def test_command_r_and_deepseek_v2_templates_chat(server_factory, models, tmp_path, template):
    """A model carrying Command-R's or DeepSeek-V2's plain template chats (the rendering itself
    is checked byte for byte against jinja2 in tests/model/chat_template_reference_test.cc)."""
    dst = tmp_path / "tiny-llama-chat.gguf"
    write_variant(models / "tiny-llama.gguf", dst,
                  chat_template=(TEMPLATES / template).read_text(encoding="utf-8"))
    server = server_factory(dst, "--graph-mode", "off", name="chat-" + template.split("-")[0])
    try:
        r = server.post("/v1/chat/completions",
                        {"messages": [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "hi"}],
                         "max_tokens": 4, "ignore_eos": True})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] == 4
        # The template's own refusals come back as 400s: two user turns in a row.
        r = server.post("/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "a"},
                                      {"role": "user", "content": "b"}], "max_tokens": 4})
        assert r.status_code == (400 if template.startswith("Cohere") else 200), r.text
    finally:
        assert server.stop() == 0
