"""kiln as a worker behind SGLang's router (PyPI `sglang-router`): two `kiln serve` workers on
loopback, the router in front with cache-aware routing. The router discovers the workers through
their current endpoints (/server_info, /model_info, no fallback to the deprecated names), routes
/generate and /v1/completions (the official openai client), keeps same-prefix requests on one
worker (read from each worker's /metrics), polls /get_load, and keeps serving when a worker is
killed; the worker rejoins when it comes back on its address."""
import socket
import subprocess
import sys
import time

import openai
import pytest
import requests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Router:
    def __init__(self, workers, log_path, policy="cache_aware"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
             "--port", str(self.port), "--policy", policy, "--log-level", "debug",
             "--prometheus-port", str(free_port()),
             # Fast failure detection and recovery, so the kill test is short.
             "--health-check-interval-secs", "1", "--health-failure-threshold", "1",
             "--health-success-threshold", "1", "--cb-timeout-duration-secs", "2",
             "--worker-urls", *[w.url for w in workers]],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/v1/models", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        raise RuntimeError("router not ready:\n" + self.log())

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        self._log.close()


@pytest.fixture(scope="module")
def cluster(server_factory, gemma, tmp_path_factory):
    workers = [server_factory(gemma, "--threads", "1", name=f"worker{i}") for i in range(2)]
    router = Router(workers, tmp_path_factory.mktemp("router") / "router.log")
    yield router, workers
    router.stop()


@pytest.fixture
def round_robin(cluster, tmp_path):
    router = Router(cluster[1], tmp_path / "router-rr.log", policy="round_robin")
    yield router
    router.stop()


def requests_served(worker) -> float:
    return sum(v for k, v in worker.metrics().items() if k.startswith("kiln_requests_total"))


def test_workers_registered_through_current_endpoints(cluster):
    router, workers = cluster
    log = router.log()
    assert "falling back" not in log, log[-2000:]
    for w in workers:
        assert w.get("/server_info").json()["dp_size"] == 1
        assert w.get("/model_info").json()["served_model_name"]
        load = w.get("/get_load").json()
        assert isinstance(load, list) and load[0]["num_reqs"] == 0


def test_generate_and_openai_client_through_the_router(cluster):
    router, workers = cluster
    body = {"text": "Hello from the router", "sampling_params": {
        "max_new_tokens": 6, "temperature": 0, "ignore_eos": True}}
    via_router = requests.post(router.url + "/generate", json=body, timeout=120).json()
    direct = workers[0].generate(body)
    assert via_router["text"] == direct["text"]
    client = openai.OpenAI(base_url=router.url + "/v1", api_key="unused", max_retries=0)
    model = workers[0].get("/v1/models").json()["data"][0]["id"]
    c = client.completions.create(model=model, prompt="Hello from the router", max_tokens=6,
                                  temperature=0, extra_body={"ignore_eos": True})
    assert c.choices[0].text == direct["text"]


def send_same_prefix(router, workers, tag):
    """Five requests sharing a long prefix; how many each worker served."""
    before = [requests_served(w) for w in workers]
    prefix = f"{tag}: you are a careful assistant. Answer in one short sentence. " * 4
    for i in range(5):
        r = requests.post(router.url + "/generate", json={
            "text": prefix + f"Question {i}: what is {i} plus {i}?",
            "sampling_params": {"max_new_tokens": 4, "temperature": 0}}, timeout=120)
        assert r.status_code == 200, r.text
    return [requests_served(w) - b for w, b in zip(workers, before)]


def test_prefix_sharing_requests_land_on_one_worker(cluster, round_robin):
    router, workers = cluster
    hits_before = sum(w.metrics()["kiln_prefix_cache_hit_tokens_total"] for w in workers)
    assert sorted(send_same_prefix(router, workers, "cache-aware")) == [0, 5]
    hits = sum(w.metrics()["kiln_prefix_cache_hit_tokens_total"] for w in workers) - hits_before
    # Round robin splits the same traffic, so each worker prefills the prefix itself.
    assert sorted(send_same_prefix(round_robin, workers, "round-robin")) == [2, 3]
    assert hits > 0


def wait_health(router, worker, healthy: bool, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = requests.get(router.url + "/workers", timeout=10).json()["workers"]
        if any(w["url"] == worker.url and w["is_healthy"] == healthy for w in listed):
            return
        time.sleep(0.2)
    raise AssertionError(f"{worker.url} not healthy={healthy} after {timeout} s")


def test_a_killed_worker_leaves_and_rejoins(cluster, round_robin, server_factory, gemma):
    # Round robin, so that every healthy worker is sure to get requests.
    router, workers = round_robin, cluster[1]
    victim = workers[1]
    port = int(victim.url.rsplit(":", 1)[1])
    victim.kill()
    # Requests sent before the router notices can fail: its retries go back to the worker the
    # policy chose until the circuit breaker opens. Once its health check has marked the worker
    # unhealthy, every request must succeed on the survivor.
    wait_health(router, victim, healthy=False)
    for i in range(8):
        r = requests.post(router.url + "/generate", json={
            "text": f"After the kill {i}", "sampling_params": {"max_new_tokens": 3}}, timeout=120)
        assert r.status_code == 200, router.log()[-3000:]
    # Back on the same address: the router's health check sees it again and routes to it.
    back = server_factory(gemma, "--threads", "1", name="worker1-back", port=port)
    workers[1] = back
    wait_health(router, back, healthy=True)
    for i in range(6):
        r = requests.post(router.url + "/generate", json={
            "text": f"Rejoined {i}", "sampling_params": {"max_new_tokens": 2}}, timeout=120)
        assert r.status_code == 200, r.text
    assert requests_served(back) >= 2, router.log()[-3000:]
