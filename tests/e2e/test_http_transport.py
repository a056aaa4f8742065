"""The event-driven HTTP layer against a real engine: a non-streaming request whose client
disconnects is cancelled and its KV pages return; SIGTERM drains (non-streaming requests in
flight finish with their whole output, the process exits 0, slow connections do not hold it
up); a second signal exits at once."""
import concurrent.futures as cf
import json
import signal
import socket
import time

import requests

GREEDY = {"temperature": 0, "ignore_eos": True}


def host_port(server):
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def wait_running(server, n, timeout=120.0):
    deadline = time.monotonic() + timeout
    while True:
        m = server.metrics()
        if m["kiln_num_running_reqs"] >= n:
            return m
        assert time.monotonic() < deadline, f"never {n} running: {m}"
        time.sleep(0.02)


def send_generate(server, body: dict) -> socket.socket:
    data = json.dumps(body).encode()
    s = socket.create_connection(host_port(server))
    s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


def test_non_streaming_request_is_cancelled_when_its_client_leaves(server_factory, gemma):
    # A long context so each request could run for 8000 tokens: the cancellation, not the end
    # of the generation, is what frees them even on a loaded machine.
    server = server_factory(gemma, "--context-length", "8192", "--kv-tokens", "65536",
                            name="disconnect-nonstream")
    m0 = server.metrics()
    sockets = [send_generate(server, {"text": f"leave {i}",
                                      "sampling_params": {**GREEDY, "max_new_tokens": 8000}})
               for i in range(4)]
    wait_running(server, 4)
    for s in sockets:
        s.close()
    m = server.wait_idle(timeout=60)
    aborted = 'kiln_requests_total{finish_reason="abort"}'
    assert m[aborted] - m0[aborted] == 4
    generated = "kiln_request_generation_tokens_total"
    assert m[generated] - m0[generated] < 4 * 2000  # cancelled early, not run to 8000
    server.assert_all_pages_free()
    assert server.generate({"text": "still fine", "sampling_params": {**GREEDY,
                                                                     "max_new_tokens": 4}})
    assert server.stop() == 0


def test_sigterm_lets_non_streaming_requests_finish(server_factory, gemma):
    s = server_factory(gemma, "--shutdown-timeout", "120", name="drain")
    # Slow connections (a header trickled, an idle keep-alive) must not hold up the exit.
    slow = socket.create_connection(host_port(s))
    slow.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    idle = socket.create_connection(host_port(s))
    tokens = 900  # the shared context is 1024 tokens

    def generate(i):
        body = {"text": f"drain {i}", "sampling_params": {**GREEDY, "max_new_tokens": tokens}}
        r = requests.post(s.url + "/generate", json=body, timeout=180)
        return r.status_code, r.json()

    with cf.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(generate, i) for i in range(4)]
        wait_running(s, 4)
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        # No longer accepting: a new connection is refused (or closed unanswered).
        try:
            r = requests.get(s.url + "/health", timeout=5)
            refused = False
        except requests.ConnectionError:
            refused = True
        assert refused or s.proc.poll() is not None
        results = [f.result(timeout=180) for f in futures]
    for status, out in results:
        assert status == 200, out
        assert out["meta_info"]["finish_reason"]["type"] == "length", out
        assert out["meta_info"]["completion_tokens"] == tokens
    assert s.proc.wait(timeout=60) == 0
    assert "stopped" in s.log()
    slow.close()
    idle.close()


def test_second_signal_exits_at_once(server_factory, gemma):
    s = server_factory(gemma, "--context-length", "8192", "--kv-tokens", "65536",
                       "--shutdown-timeout", "300", name="drain-twice")
    socks = [send_generate(s, {"text": f"long {i}",
                               "sampling_params": {**GREEDY, "max_new_tokens": 8000}})
             for i in range(2)]
    wait_running(s, 2)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert s.proc.poll() is None  # draining: the requests may take their time
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    code = s.proc.wait(timeout=10)
    assert time.monotonic() - t0 < 5
    assert code == 128 + signal.SIGTERM
    for sock in socks:
        sock.close()
