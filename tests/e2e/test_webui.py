"""The chat page at `/` (docs/webui.md) in a real browser: headless Chromium driven by Selenium
against `kiln serve` on tiny random-weight models. What the page shows is checked against what
the API answers for the same greedy request; stopping a reply must cancel it on the server; the
API key is asked for; nothing the page loads comes from anywhere but the server.

Chromium and its driver are Debian packages (scripts/setup.sh installs them); the tests skip,
saying why, only where they cannot be found."""
import json
import shutil
import time

import pytest
import requests
from conftest import server_args
from gguf_variant import write_variant
from kiln_server import KilnServer

try:  # the browser tests need it; the server's side is checked without
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    webdriver = None

KEY = "webui-secret-key"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    if webdriver is None:
        pytest.skip("selenium is not installed (scripts/requirements.txt; scripts/setup.sh)")
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("Chromium or chromedriver not found (Debian packages chromium and "
                    "chromium-driver; scripts/setup.sh installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1100,900", "--no-first-run", "--disable-extensions",
                 # The browser's own traffic (updates, safe browsing) is not the page's; off, so
                 # nothing leaves the machine during the tests either.
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-default-apps"]:
        options.add_argument(flag)
    # The DevTools network events of every page: the requests the page made, wherever to.
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(options=options,
                              service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def chat_server(server_factory, models):
    """tiny Qwen2 with a context long enough that a reply can run for seconds (to be stopped)."""
    return server_factory(models / "tiny-qwen2.gguf", "--graph-mode", "off",
                          "--context-length", "32768", "--kv-tokens", "40000", name="webui")


@pytest.fixture(scope="module")
def keyed_server(server_factory, models):
    return server_factory(models / "tiny-qwen2.gguf", "--graph-mode", "off", "--api-key", KEY,
                          name="webui-keyed")


@pytest.fixture(scope="module")
def no_template_server(server_factory, models, tmp_path_factory):
    dst = tmp_path_factory.mktemp("webui-no-chat") / "tiny-qwen2-no-template.gguf"
    write_variant(models / "tiny-qwen2.gguf", dst, chat_template="")
    return server_factory(dst, "--graph-mode", "off", name="webui-no-chat")


@pytest.fixture(scope="module")
def no_webui_server(models, tmp_path_factory):
    # A bare flag, which server_factory's (flag, value) pairs cannot carry.
    server = KilnServer(models / "tiny-qwen2.gguf", *server_args("--graph-mode", "off"),
                        "--no-webui", log_dir=tmp_path_factory.mktemp("webui-off"),
                        name="webui-off")
    yield server
    server.stop()


# ---- helpers ----

def wait_for(driver, condition, timeout=30.0, what="the page"):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.02).until(lambda d: condition(d))
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}; page text:\n"
                             f"{driver.find_element(By.TAG_NAME, 'body').text}") from None


def open_page(driver, server):
    driver.get_log("performance")  # drop earlier pages' events
    driver.get(server.url + "/")
    # A fresh start: no key or settings from an earlier test's server on another port.
    driver.execute_script("sessionStorage.clear(); localStorage.clear();")
    driver.get(server.url + "/")


def set_field(driver, element_id, value):
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(str(value))
    field.send_keys(Keys.TAB)  # "change" fires when the field loses focus


def settings(driver, temperature=None, max_tokens=None, system=None):
    toggle = driver.find_element(By.ID, "settings-toggle")
    if toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    if temperature is not None:
        set_field(driver, "temperature", temperature)
    if max_tokens is not None:
        set_field(driver, "max-tokens", max_tokens)
    if system is not None:
        set_field(driver, "system-prompt", system)


def send(driver, text):
    box = driver.find_element(By.ID, "prompt")
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def replies(driver):
    return driver.find_elements(By.CSS_SELECTOR, "article.message.assistant")


def last_reply(driver, state, timeout=60.0):
    """The newest reply once its data-state is `state` (streaming, done, stopped, error)."""
    def ready(d):
        found = replies(d)
        return found[-1] if found and found[-1].get_attribute("data-state") == state else None
    return wait_for(driver, ready, timeout, f"a reply in state {state}")


def reply_text(reply):
    return reply.find_element(By.CLASS_NAME, "body").get_attribute("textContent")


def api_chat(server, messages, max_tokens, headers=None):
    r = requests.post(server.url + "/v1/chat/completions", timeout=120, headers=headers or {},
                      json={"messages": messages, "temperature": 0, "max_tokens": max_tokens})
    assert r.status_code == 200, r.text
    return r.json()


def requested_urls(driver):
    """Every URL the page asked for since the last call (DevTools Network events)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def assert_only_this_server(driver, server):
    urls = requested_urls(driver)
    assert any(u.startswith(server.url + "/v1/") for u in urls), urls  # the log is being read
    outside = [u for u in urls if not (u.startswith(server.url + "/") or u.startswith("data:"))]
    assert not outside, f"the page requested other hosts: {outside}"
    loaded = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(u.startswith(server.url + "/") for u in loaded), loaded
    blocked = [e["message"] for e in driver.get_log("browser")
               if "Content Security Policy" in e["message"]]
    assert not blocked, blocked


# ---- the server side: headers, caching, --no-webui ----

def test_page_and_files_are_served_with_a_strict_policy(chat_server):
    page = requests.get(chat_server.url + "/", timeout=30)
    assert page.status_code == 200
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    csp = page.headers["Content-Security-Policy"]
    for directive in ["default-src 'none'", "script-src 'self'", "connect-src 'self'",
                      "style-src 'self'", "frame-ancestors 'none'"]:
        assert directive in csp, csp
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["Cache-Control"] == "no-cache"
    assert "<script type=\"module\" src=\"/webui/app.js\">" in page.text
    assert "http://" not in page.text and "https://" not in page.text
    for name, kind in [("app.js", "text/javascript"), ("render.js", "text/javascript"),
                       ("sse.js", "text/javascript"), ("style.css", "text/css")]:
        r = requests.get(chat_server.url + "/webui/" + name, timeout=30)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith(kind), name
        assert "Content-Security-Policy" in r.headers
    # HEAD: the same head, no body; a matching ETag: 304 without a body.
    head = requests.head(chat_server.url + "/", timeout=30)
    assert head.status_code == 200 and head.headers["ETag"] == page.headers["ETag"]
    assert head.headers["Content-Length"] == str(len(page.content)) and head.content == b""
    again = requests.get(chat_server.url + "/", headers={"If-None-Match": page.headers["ETag"]},
                         timeout=30)
    assert again.status_code == 304 and again.content == b""
    assert requests.get(chat_server.url + "/", headers={"If-None-Match": '"other"'},
                        timeout=30).status_code == 200
    assert requests.get(chat_server.url + "/webui/missing.js", timeout=30).status_code == 404
    assert "chat in the browser: " + chat_server.url + "/" in chat_server.log()


def test_no_webui_answers_404_naming_the_flag(no_webui_server):
    r = requests.get(no_webui_server.url + "/", timeout=30)
    assert r.status_code == 404, r.text
    assert "--no-webui" in r.json()["error"]["message"]
    assert requests.get(no_webui_server.url + "/webui/app.js", timeout=30).status_code == 404
    assert requests.get(no_webui_server.url + "/v1/models", timeout=30).status_code == 200
    assert "chat in the browser" not in no_webui_server.log()


def test_the_page_needs_no_key_but_the_api_does(keyed_server):
    assert requests.get(keyed_server.url + "/", timeout=30).status_code == 200
    assert requests.get(keyed_server.url + "/webui/app.js", timeout=30).status_code == 200
    assert requests.get(keyed_server.url + "/v1/models", timeout=30).status_code == 401
    assert requests.get(keyed_server.url + "/webui/missing.js", timeout=30).status_code == 401


# ---- in the browser ----

def test_streamed_reply_is_the_api_reply(browser, chat_server):
    open_page(browser, chat_server)
    model_id = requests.get(chat_server.url + "/v1/models", timeout=30).json()["data"][0]["id"]
    wait_for(browser, lambda d: d.find_element(By.ID, "model-name").text == model_id,
             what="the model name")
    settings(browser, temperature=0, max_tokens=40, system="You are terse.")
    send(browser, "Hello there")
    reply = last_reply(browser, "done")
    expected = api_chat(chat_server, [{"role": "system", "content": "You are terse."},
                                      {"role": "user", "content": "Hello there"}], 40)
    content = expected["choices"][0]["message"]["content"]
    assert "`" not in content  # rendered as plain prose, so the text is the reply's
    assert reply_text(reply) == content
    meta = reply.find_element(By.CLASS_NAME, "meta")
    assert meta.get_attribute("data-tokens") == str(expected["usage"]["completion_tokens"])
    assert "tokens/s" in meta.text
    # The second turn carries the first: the page's conversation is the API's.
    send(browser, "And again")
    wait_for(browser, lambda d: len(replies(d)) == 2, what="a second reply")
    second = last_reply(browser, "done")
    follow_up = api_chat(chat_server, [{"role": "system", "content": "You are terse."},
                                       {"role": "user", "content": "Hello there"},
                                       {"role": "assistant", "content": content},
                                       {"role": "user", "content": "And again"}], 40)
    assert reply_text(second) == follow_up["choices"][0]["message"]["content"]
    assert_only_this_server(browser, chat_server)


def test_new_chat_clears_the_conversation(browser, chat_server):
    open_page(browser, chat_server)
    settings(browser, temperature=0, max_tokens=16)
    send(browser, "First question")
    last_reply(browser, "done")
    toggle = browser.find_element(By.ID, "settings-toggle")
    toggle.click()  # the settings close again
    assert toggle.get_attribute("aria-expanded") == "false"
    assert not browser.find_element(By.ID, "settings").is_displayed()
    browser.find_element(By.ID, "new-chat").click()
    assert browser.find_elements(By.CSS_SELECTOR, "article.message") == []
    assert browser.find_element(By.ID, "empty-note").is_displayed()
    # The next reply is that of a conversation holding only the new message.
    send(browser, "Second question")
    reply = last_reply(browser, "done")
    expected = api_chat(chat_server, [{"role": "user", "content": "Second question"}], 16)
    assert reply_text(reply) == expected["choices"][0]["message"]["content"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "article.message")) == 2


def test_stop_halts_the_reply_and_frees_the_request(browser, chat_server):
    aborted = 'kiln_requests_total{finish_reason="abort"}'
    before = chat_server.wait_idle()
    open_page(browser, chat_server)
    settings(browser, temperature=0, max_tokens=30000)
    send(browser, "Tell me everything")
    reply = last_reply(browser, "streaming")
    wait_for(browser, lambda d: len(reply_text(reply)) > 0, what="the first streamed text")
    seen = len(reply_text(reply))
    wait_for(browser, lambda d: len(reply_text(reply)) > seen, what="the text to grow")
    assert reply.get_attribute("data-state") == "streaming"  # it grew while streaming
    browser.find_element(By.ID, "stop").click()
    last_reply(browser, "stopped", timeout=10)
    text = reply_text(reply)
    tokens = int(reply.find_element(By.CLASS_NAME, "meta").get_attribute("data-tokens"))
    assert 0 < tokens < 30000
    assert "stopped" in reply.find_element(By.CLASS_NAME, "meta").text
    # The server saw the client go: the request ended as an abort and its pages are free.
    after = chat_server.wait_idle(timeout=10)
    assert after[aborted] == before.get(aborted, 0) + 1, after
    assert after["kiln_generation_tokens_total"] - before["kiln_generation_tokens_total"] < 30000
    chat_server.assert_all_pages_free()
    time.sleep(0.5)
    assert reply_text(reply) == text  # and nothing more arrived
    assert browser.find_element(By.ID, "send").is_enabled()
    assert not browser.find_element(By.ID, "stop").is_enabled()


def test_replies_and_messages_are_text_never_markup(browser, chat_server):
    open_page(browser, chat_server)
    settings(browser, temperature=0, max_tokens=4)
    hostile = '<img src=x onerror="window.pwned=1"><b>bold</b>'
    box = browser.find_element(By.ID, "prompt")
    box.send_keys(hostile)
    box.send_keys(Keys.SHIFT, Keys.ENTER)  # Shift+Enter: a new line, not sent
    assert browser.find_elements(By.CSS_SELECTOR, "article.message") == []
    # (Shift is held until the end of a send_keys call, so each line is its own call.)
    box.send_keys("```python")
    box.send_keys(Keys.SHIFT, Keys.ENTER)
    box.send_keys("print('<i>hi</i>')")
    box.send_keys(Keys.SHIFT, Keys.ENTER)
    box.send_keys("```")
    box.send_keys(Keys.ENTER)
    last_reply(browser, "done")
    mine = browser.find_element(By.CSS_SELECTOR, "article.message.user .body")
    assert mine.find_elements(By.TAG_NAME, "img") == []
    assert mine.find_elements(By.TAG_NAME, "b") == []
    assert hostile in mine.get_attribute("textContent")
    code = mine.find_element(By.CSS_SELECTOR, "figure.code pre code")
    assert code.get_attribute("textContent") == "print('<i>hi</i>')"
    assert code.get_attribute("data-lang") == "python"
    assert browser.execute_script("return window.pwned === undefined")


def test_the_key_is_asked_for_and_then_used(browser, keyed_server):
    open_page(browser, keyed_server)
    dialog = browser.find_element(By.ID, "key-dialog")
    wait_for(browser, lambda d: dialog.get_attribute("open") is not None, what="the key dialog")
    key_input = browser.find_element(By.ID, "key-input")
    key_input.send_keys("wrong-key", Keys.ENTER)
    # Refused: asked again, saying so.
    wait_for(browser, lambda d: "refused" in d.find_element(By.ID, "key-reason").text,
             what="the refused-key message")
    assert dialog.get_attribute("open") is not None
    key_input.send_keys(KEY)
    browser.find_element(By.ID, "key-save").click()
    wait_for(browser, lambda d: d.find_element(By.ID, "model-name").text == "tiny-qwen2",
             what="the model name after the key")
    assert dialog.get_attribute("open") is None
    assert browser.execute_script("return sessionStorage.getItem('kiln.apiKey')") == KEY
    settings(browser, temperature=0, max_tokens=12)
    send(browser, "Hi")
    reply = last_reply(browser, "done")
    expected = api_chat(keyed_server, [{"role": "user", "content": "Hi"}], 12,
                        headers={"Authorization": "Bearer " + KEY})
    assert reply_text(reply) == expected["choices"][0]["message"]["content"]
    assert_only_this_server(browser, keyed_server)


def test_a_model_without_chat_template_says_so(browser, no_template_server):
    open_page(browser, no_template_server)
    send(browser, "Hello")
    reply = last_reply(browser, "error")
    refusal = requests.post(no_template_server.url + "/v1/chat/completions", timeout=30,
                            json={"messages": [{"role": "user", "content": "Hello"}]})
    assert refusal.status_code == 400
    message = refusal.json()["error"]["message"]
    assert message.startswith("chat is unavailable for this model: the model file has no chat")
    assert reply_text(reply) == message
    assert reply.get_attribute("class") == "message assistant error"
    # The turn did not happen: its text is back in the box, ready to send again.
    assert browser.find_element(By.ID, "prompt").get_attribute("value") == "Hello"


def run_module(driver, module, body):
    """Runs `body` (JavaScript with `m`, the imported module) in the page; returns its value."""
    script = ("const done = arguments[arguments.length - 1];"
              f"import('/webui/{module}').then(async (m) => done(await (async () => {{ {body} }})()))"
              ".catch((e) => done('error: ' + e));")
    return driver.execute_async_script(script)


def test_fences_split_as_the_page_shows_them(browser, chat_server):
    open_page(browser, chat_server)
    split = lambda text: run_module(  # noqa: E731
        browser, "render.js", f"return m.splitFences({json.dumps(text)});")
    assert split("plain `x` text") == [{"kind": "text", "text": "plain `x` text", "lang": ""}]
    assert split("Here:\n\n```py\nprint(1)\n\n```\n\nAfter") == [
        {"kind": "text", "text": "Here:", "lang": ""},
        {"kind": "code", "text": "print(1)\n", "lang": "py"},
        {"kind": "text", "text": "After", "lang": ""}]
    # Still streaming: an open block runs to the end; a longer fence needs as long a close.
    assert split("a\n```\nx") == [{"kind": "text", "text": "a", "lang": ""},
                                  {"kind": "code", "text": "x", "lang": ""}]
    assert split("````md\n```\n````") == [{"kind": "code", "text": "```", "lang": "md"}]
    assert split("``` not `a fence`") == [
        {"kind": "text", "text": "``` not `a fence`", "lang": ""}]


def test_event_stream_reader_handles_any_chunking(browser, chat_server):
    open_page(browser, chat_server)
    chunks = ["data: {\"a\"", ":1}\r\n\r\ndata: x\ndata:  y\n\n: comment\nevent: e\ndata: z\r",
              "\n\r", "\ndata: [DONE]\n\n", "data: last"]
    got = run_module(browser, "sse.js", f"""
        const enc = new TextEncoder();
        const body = new ReadableStream({{start(c) {{
          for (const chunk of {json.dumps(chunks)}) c.enqueue(enc.encode(chunk));
          c.close(); }}}});
        const out = [];
        for await (const data of m.sseData(new Response(body))) out.push(data);
        return out;""")
    # The last event has no blank line after it: unfinished, so dropped (as EventSource does).
    assert got == ['{"a":1}', "x\n y", "z", "[DONE]"]
