"""`kiln eval gsm8k --mode chat`: the messages it sends (shots as earlier exchanges, the
final-answer instruction on every user turn) and how it reads answers out of replies, checked
against known strings through a scripted OpenAI-style server; then the same mode against a
real `kiln serve` with a tiny model (the request path end to end)."""
import http.server
import json
import re
import subprocess
import threading

import pytest

from kiln_server import kiln_bin

INSTRUCTION = ('Solve the problem step by step. Write the final answer as a plain number on the '
               'last line, in the form "#### <number>".')

ROWS = [
    ("Tom has 3 apples and buys 4 more. How many?", "3 + 4 = <<3+4=7>>7\n#### 7"),
    ("A shop sells 2 pens for $1. What do 6 cost?", "6 / 2 = 3\n#### 3"),
    ("Sara earns $9 an hour for 2 hours. How much?", "9 * 2 = 18\n#### 18"),
    ("A town has 400 and 600 people. Total?", "400 + 600 = 1000\n#### 1,000"),
    ("Jo has 10 cards and gives away 3. Left?", "10 - 3 = 7\n#### 7"),
    ("A car goes 5 miles each day for 1 day. Miles?", "#### 5"),
    ("What is 2 times 2?", "#### 4"),
    ("The temperature falls from 2 to -3 degrees. Where does it end?", "#### -3"),
]

# Replies by question: what a chat model writes, and what kiln must read from it.
REPLIES = {
    ROWS[2][0]: ("She earns 9 * 2 = 18 dollars.\n#### 18", "18", True),
    ROWS[3][0]: ("400 + 600 = 1,000, so the answer is \\boxed{1,000}.", "1000", True),
    ROWS[4][0]: ("He has 10 - 3 = 7 cards left, worth $7.00 in total... so 7.00", "7", True),
    ROWS[5][0]: ("#### 6\nThat is 5 + 1 = 6 miles.", "6", False),
    ROWS[6][0]: ("I cannot tell.", None, False),
    ROWS[7][0]: ("2 - 5 = -3\n#### -3", "-3", True),
}


class ScriptedChatServer(http.server.ThreadingHTTPServer):
    """Answers /v1/models and /v1/chat/completions from REPLIES, recording every request."""

    def __init__(self):
        self.requests = []
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self.reply({"object": "list", "data": [{"id": "scripted", "object": "model"}]})

            def do_POST(inner):
                body = json.loads(inner.rfile.read(int(inner.headers["Content-Length"])))
                with self.lock:
                    self.requests.append((inner.path, body))
                question = body["messages"][-1]["content"].split("\n\n")[0]
                text = REPLIES[question][0]
                inner.reply({"choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": text}}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                       "total_tokens": 15}})

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in ROWS))
    return path


def run_eval(url, data, out, *extra):
    return subprocess.run([kiln_bin(), "eval", "gsm8k", "--mode", "chat", "--url", url,
                           "--data-path", str(data), "--num-shots", "2", "--parallel", "3",
                           "--output-jsonl", str(out), *extra],
                          capture_output=True, text=True, timeout=300)


def test_chat_mode_prompts_and_answers_against_known_strings(data, tmp_path):
    server = ScriptedChatServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        out = tmp_path / "results.jsonl"
        r = run_eval(f"http://127.0.0.1:{server.server_address[1]}", data, out,
                     "--max-new-tokens", "300")
    finally:
        server.shutdown()
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    # 6 questions: 4 right (18, 1000, 7, -3), one wrong (6 for 5), one without a number.
    assert lines[0] == "Accuracy: 0.667" and lines[1] == "Invalid: 0.167", r.stdout
    shots = [
        {"role": "user", "content": ROWS[0][0] + "\n\n" + INSTRUCTION},
        {"role": "assistant", "content": ROWS[0][1]},
        {"role": "user", "content": ROWS[1][0] + "\n\n" + INSTRUCTION},
        {"role": "assistant", "content": ROWS[1][1]},
    ]
    assert len(server.requests) == 6
    for path, body in server.requests:
        assert path == "/v1/chat/completions"
        assert body["model"] == "scripted" and body["temperature"] == 0
        assert body["max_tokens"] == 300 and "stop" not in body
        question = body["messages"][-1]["content"].split("\n\n")[0]
        assert body["messages"] == shots + [
            {"role": "user", "content": question + "\n\n" + INSTRUCTION}]
    results = [json.loads(l) for l in out.read_text().splitlines()]
    assert [x["index"] for x in results] == list(range(2, 8))
    for x in results:
        _, pred, correct = REPLIES[x["question"]]
        assert x["pred"] == pred and x["correct"] is correct, x
        assert x["messages"][-1]["content"] == x["question"] + "\n\n" + INSTRUCTION
    assert [x["label"] for x in results] == ["18", "1000", "7", "5", "4", "-3"]


def test_chat_mode_against_kiln_serve(server, data, tmp_path):
    out = tmp_path / "results.jsonl"
    r = run_eval(server.url, data, out, "--num-questions", "3", "--max-new-tokens", "8")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert re.fullmatch(r"Accuracy: \d\.\d{3}", lines[0]), r.stdout
    assert re.fullmatch(r"Output throughput: \d+\.\d{3} token/s", lines[3])
    results = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(results) == 3
    assert all(0 < x["completion_tokens"] <= 8 and "error" not in x for x in results)
    assert all(len(x["messages"]) == 5 for x in results)


def test_chat_mode_rejects_an_unknown_mode(data):
    r = subprocess.run([kiln_bin(), "eval", "gsm8k", "--mode", "dialogue", "--data-path",
                        str(data)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--mode" in r.stderr
