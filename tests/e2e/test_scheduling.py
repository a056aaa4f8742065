"""Scheduling over HTTP: --schedule-policy, the per-request `priority` on every generation route,
and `kiln bench serving --dataset shared-prefix` reporting the prefix cache's hit rate. Which
request runs when is tested exactly on the engine harness (tests/engine/schedule_policy_test.cc);
here the flag and the field must reach the engine and leave the outputs unchanged."""
import json
import subprocess

import pytest

from kiln_server import kiln_bin

GREEDY = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}


@pytest.fixture(scope="module")
def fcfs_server(server_factory, gemma):
    return server_factory(gemma, "--schedule-policy", "fcfs", name="fcfs")


def test_server_info_reports_the_policy(fcfs_server, server):
    assert server.get("/get_server_info").json()["schedule_policy"] == "lpm"  # the default
    assert fcfs_server.get("/get_server_info").json()["schedule_policy"] == "fcfs"


def test_priority_is_accepted_on_every_route_and_changes_no_output(fcfs_server, server):
    body = {"text": "Once upon a time", "sampling_params": GREEDY}
    plain = fcfs_server.generate(body)["output_ids"]
    for s in (server, fcfs_server):
        for priority in (-5, 0, 7):
            assert s.generate({**body, "priority": priority})["output_ids"] == plain
        r = s.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 4,
                                       "temperature": 0, "priority": 3})
        assert r.status_code == 200, r.text
        r = s.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "priority": -2})
        assert r.status_code == 200, r.text
        s.assert_all_pages_free()


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 1.5, "high", True])
def test_a_bad_priority_is_a_400_naming_it(server, value):
    bodies = {
        "/generate": {"text": "hi", "sampling_params": GREEDY, "priority": value},
        "/v1/completions": {"prompt": "hi", "max_tokens": 2, "priority": value},
        "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}],
                                 "max_tokens": 2, "priority": value},
    }
    for path, body in bodies.items():
        r = server.post(path, body)
        assert r.status_code == 400, (path, r.text)
        assert r.json()["error"]["param"] == "priority", (path, r.text)


def test_an_unknown_policy_is_refused_before_the_model_loads(gemma):
    r = subprocess.run([kiln_bin(), "serve", "-m", str(gemma), "--schedule-policy", "random"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "unknown schedule policy 'random' (expected lpm or fcfs)" in r.stderr, r.stderr


def test_bench_serving_shared_prefix_reports_the_hit_rate(server, tmp_path):
    out = tmp_path / "bench.json"
    r = subprocess.run([kiln_bin(), "bench", "serving", "--url", server.url,
                        "--dataset", "shared-prefix", "--shared-prefix-groups", "2",
                        "--shared-prefix-len", "64", "--num-prompts", "8", "--input-len", "8",
                        "--output-len", "4", "--max-concurrency", "2", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Prefix cache hit rate:" in r.stdout
    res = json.loads(out.read_text())
    assert res["completed"] == 8 and res["dataset"] == "shared-prefix"
    assert res["total_input_tokens"] >= 8 * (64 + 8)
    # Six of the eight requests find their group's 64 tokens cached (whole pages of them).
    assert res["total_cached_tokens"] >= 6 * 48, res
    assert 0 < res["prefix_cache_hit_rate"] < 1
