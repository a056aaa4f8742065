"""`kiln graph`, `kiln bench` (offline) and `kiln run --check-graph` on the tiny random-weight models.

Run with: KILN_BIN=build/release/kiln .venv/bin/python3 -m pytest tests/e2e/test_cli_tools.py
The models come from KILN_TESTDATA (or build/release/testdata), else they are generated into a
temporary folder with tests/fixtures/make_models.py.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest
from kiln_server import kiln_bin as _kiln_bin
from kiln_server import tiny_models_dir as _tiny_models


@pytest.fixture(scope="module")
def tiny_gemma() -> pathlib.Path:
    return _tiny_models() / "tiny-gemma3.gguf"


def kiln(*args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([_kiln_bin(), *map(str, args)], capture_output=True, text=True, timeout=timeout)


# ---- kiln graph ----

def test_graph_prints_stats_ir_memory_schedule_and_dot(tiny_gemma, tmp_path):
    dot = tmp_path / "g.dot"
    r = kiln("graph", "-m", tiny_gemma, "--bs", 4, "--greedy", "--stats", "--print-before", "--print-after", "all",
             "--memory", "--dot", dot, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # The pass statistics table names every pass that printed IR, in the same order.
    after = re.findall(r"^// ---- IR after pass (\S+) ----$", out, re.M)
    assert len(after) >= 5, out[:2000]
    stats = out[out.index("pass statistics:"):]
    positions = [stats.find(name) for name in after]
    assert all(p >= 0 for p in positions), (after, stats[:2000])
    assert positions == sorted(positions)
    # Before and after: whole graphs (header and closing brace), batch 4.
    assert out.count("// ---- IR before passes ----") == 1
    assert len(re.findall(r"^graph decode\(T=4, S=4\) \{$", out, re.M)) == len(after) + 1
    m = re.search(r"^graph: decode B=4, greedy plan, graph mode optimize: (\d+) nodes traced -> (\d+) after passes",
                  out, re.M)
    assert m and int(m.group(2)) < int(m.group(1)), out[-3000:]
    m = re.search(r"^memory: arena ([\d.]+) MiB, planned ([\d.]+) MiB, reuse ratio ([\d.]+)x", out, re.M)
    assert m and float(m.group(3)) >= 1.0
    assert re.search(r"^schedule: before passes \d+ ops in \d+ levels", out, re.M)
    text = dot.read_text()
    assert text.startswith("digraph") and "->" in text


def test_graph_rejects_unknown_pass(tiny_gemma):
    r = kiln("graph", "-m", tiny_gemma, "--print-after", "no_such_pass", timeout=60)
    assert r.returncode != 0
    assert "unknown pass 'no_such_pass'" in r.stderr


def test_graph_svg_through_graphviz_or_says_why_not(tiny_gemma, tmp_path):
    svg = tmp_path / "g.svg"
    r = kiln("graph", "-m", tiny_gemma, "--svg", svg, timeout=60)
    if shutil.which("dot"):
        assert r.returncode == 0, r.stderr
        root = ET.fromstring(svg.read_text())
        assert root.tag.endswith("svg")
    else:
        assert r.returncode != 0 and "`dot` is not installed" in r.stdout
        assert not svg.exists()


def test_graph_replay_mode_keeps_the_traced_nodes(tiny_gemma):
    r = kiln("graph", "-m", tiny_gemma, "--graph-mode", "replay", timeout=60)
    assert r.returncode == 0, r.stderr
    m = re.search(r"(\d+) nodes traced -> (\d+) after passes", r.stdout)
    assert m and m.group(1) == m.group(2)


# ---- kiln bench ----

def test_bench_json_and_plot(tiny_gemma, tmp_path):
    js, svg = tmp_path / "bench.json", tmp_path / "bench.svg"
    r = kiln("bench", "-m", tiny_gemma, "--batch-sizes", "1,3", "--input-len", 8, "--output-len", 4, "--threads", 2,
             "--repeats", 2, "--bandwidth-gbs", 20, "--breakdown", "--json", js, "--plot", svg, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "eager tok/s" in r.stdout and "breakdown at batch 1" in r.stdout
    data = json.loads(js.read_text())
    assert data["config"]["threads"] == 2 and data["config"]["input_len"] == 8
    assert data["model"]["weight_bytes_per_step"] > 0
    assert len(data["load_average"]["start"]) == 3
    cap = data["capture"]
    assert cap["plans"] == 2 * 2  # greedy + logits plans for the benchmarked sizes 1 and 3
    assert cap["cold_seconds"] > 0 and cap["warm_seconds"] > 0 and cap["warm_cache_hit"] is True
    assert 0 < cap["arena_bytes"] <= cap["sum_plan_bytes"]
    assert [b["batch_size"] for b in data["results"]] == [1, 3]
    for b in data["results"]:
        assert b["prefill"]["tok_s"] > 0
        assert b["tokens_match"] is True
        for mode in ("eager", "graph"):
            m = b[mode]
            assert m["decode_tok_s"] > 0 and m["probe_step_ms"] > 0 and m["kernel_ms"] > 0
            assert m["kernels_per_step"] > 0 and m["barriers_per_step"] > 0
            assert abs(m["probe_step_ms"] - m["kernel_ms"] - m["overhead_ms"]) < 1e-6
        assert b["graph"]["barriers_per_step"] <= b["graph"]["barriers_unfused_per_step"]
        assert b["speedup"] > 0
    assert data["results"][0]["bandwidth_fraction"]["graph"]["fraction"] > 0
    names = [c["name"] for c in data["breakdown"]["configurations"]]
    assert names[0] == "eager" and names[-1] == "optimize, level barriers" and len(names) == 5
    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg") and len([e for e in root.iter() if e.tag.endswith("rect")]) >= 5


def test_bench_without_bandwidth_probe_reports_no_fraction(tiny_gemma, tmp_path):
    js = tmp_path / "noprobe.json"
    r = kiln("bench", "-m", tiny_gemma, "--batch-sizes", 1, "--input-len", 8, "--output-len", 2, "--threads", 2,
             "--repeats", 1, "--modes", "graph", "--no-bandwidth-probe", "--json", js, timeout=300)
    assert r.returncode == 0, r.stderr
    data = json.loads(js.read_text())
    assert data["bandwidth"]["gbs"] == 0
    assert "bandwidth_fraction" not in data["results"][0]
    assert "vs memory bandwidth" not in r.stdout
    # Measuring nothing and a given figure contradict each other: refused, not silently ignored.
    r = kiln("bench", "-m", tiny_gemma, "--batch-sizes", 1, "--no-bandwidth-probe", "--bandwidth-gbs", 20,
             timeout=60)
    assert r.returncode != 0 and "excludes" in r.stderr + r.stdout


def test_bench_rounds_alternate_order_with_cpu_time(tiny_gemma, tmp_path):
    js = tmp_path / "rounds.json"
    r = kiln("bench", "-m", tiny_gemma, "--batch-sizes", "1,2", "--input-len", 8, "--output-len", 4,
             "--threads", 2, "--repeats", 1, "--bandwidth-gbs", 20, "--rounds", 3, "--json", js,
             "--host-only-steps", 37, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "interleaved rounds" in r.stdout and "medians over rounds" in r.stdout
    data = json.loads(js.read_text())
    # The no-op replay harness ran every requested replay, at every graph batch size.
    for b in data["results"]:
        assert b["graph"]["host_only_replays"] == 37 and b["graph"]["host_only_step_us"] > 0
        assert b["eager"]["host_only_replays"] == 0
    assert "graph host overhead, batch 2:" in r.stdout
    rounds = data["rounds"]
    assert [(x["round"], x["bs"]) for x in rounds] == [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]
    assert [x["graph_first"] for x in rounds[::2]] == [False, True, False]
    for x in rounds:
        assert x["tokens_match"] is True
        for mode in ("eager", "graph"):
            m = x[mode]
            assert m["tok_s"] > 0 and m["wall_step_ms"] > 0 and m["cpu_step_ms"] > 0
    r = kiln("bench", "-m", tiny_gemma, "--modes", "graph", "--rounds", 2, timeout=60)
    assert r.returncode != 0 and "--rounds compares eager and graph" in r.stderr


def test_bench_paired_steps_run_each_step_in_both_modes(tiny_gemma, tmp_path):
    js = tmp_path / "paired.json"
    r = kiln("bench", "-m", tiny_gemma, "--batch-sizes", "1,3", "--input-len", 8, "--output-len", 6,
             "--threads", 2, "--repeats", 1, "--bandwidth-gbs", 20, "--paired-steps", "--json", js,
             timeout=300)
    assert r.returncode == 0, r.stderr
    assert "paired steps (every decode step run in both modes" in r.stdout
    data = json.loads(js.read_text())
    paired = data["paired_steps"]
    assert [p["bs"] for p in paired] == [1, 3]
    for p, b in zip(paired, data["results"]):
        assert len(p["eager_ms"]) == len(p["graph_ms"]) == 6
        assert min(p["eager_ms"]) > 0 and min(p["graph_ms"]) > 0
        assert p["tokens_match"] is True
        # Running every step twice (the second run rewriting the first's KV slot) follows the
        # same greedy path as the plain decode loop of each mode.
        assert p["tokens"] == b["eager"]["tokens"] == b["graph"]["tokens"]
        assert p["pair_ratio_p10"] <= p["pair_ratio_median"] <= p["pair_ratio_p90"]
        assert 0 <= p["graph_won"] <= 1
    r = kiln("bench", "-m", tiny_gemma, "--modes", "eager", "--paired-steps", timeout=60)
    assert r.returncode != 0 and "--paired-steps compares eager and graph" in r.stderr


def test_bench_rejects_unknown_mode(tiny_gemma):
    r = kiln("bench", "-m", tiny_gemma, "--modes", "eager,turbo", timeout=60)
    assert r.returncode != 0 and "unknown mode 'turbo'" in r.stderr


def test_bench_eager_only_has_no_graph_figures(tiny_gemma, tmp_path):
    js = tmp_path / "b.json"
    r = kiln("bench", "-m", tiny_gemma, "--batch-sizes", "2", "--input-len", 4, "--output-len", 2, "--threads", 2,
             "--repeats", 1, "--bandwidth-gbs", 20, "--modes", "eager", "--json", js, timeout=120)
    assert r.returncode == 0, r.stderr
    data = json.loads(js.read_text())
    assert data["capture"] is None
    assert data["results"][0]["graph"] is None and data["results"][0]["eager"]["decode_tok_s"] > 0


# ---- kiln run --check-graph ----

def test_run_check_graph_reports_ok(tiny_gemma):
    r = kiln("run", "-m", tiny_gemma, "-p", "hello world", "-n", 6, "--ignore-eos", "--threads", 2,
             "--max-graph-bs", 2, "--check-graph", timeout=120)
    assert r.returncode == 0, r.stderr
    steps = re.findall(r"^check-graph: step (\d+) OK", r.stderr, re.M)
    assert len(steps) == 5, r.stderr  # the first token comes from the (eager) prefill
    assert "divergence" not in r.stderr
    assert re.search(r"check-graph: 5 graph steps checked against eager mode, 0 diverged", r.stderr)


def test_check_graph_needs_graph_mode(tiny_gemma):
    r = kiln("run", "-m", tiny_gemma, "-p", "hi", "-n", 2, "--graph-mode", "off", "--check-graph", timeout=60)
    assert r.returncode != 0 and "needs --graph-mode" in r.stderr


# ---- kiln run output ----

def test_run_summary_starts_its_own_line_when_both_streams_share_a_pipe(tiny_gemma):
    r = subprocess.run([_kiln_bin(), "run", "-m", tiny_gemma, "-p", "hello world", "-n", "8",
                        "--ignore-eos", "--threads", "2"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 0, r.stdout
    assert re.search(r"^prompt: \d+ tokens", r.stdout, re.M), r.stdout


# ---- cache bound ----

def test_run_evicts_least_recently_used_cache_entries_but_keeps_its_own(tiny_gemma, tmp_path):
    cache = tmp_path / "cache"
    (cache / "tp2-rank1").mkdir(parents=True)

    def age(paths, days):
        for p in paths:
            t = time.time() - 86400 * days
            os.utime(p, (t, t))

    def entries():
        return sorted(p.name for p in cache.iterdir() if p.suffix in (".kgc", ".kpw"))

    def run(bound_gb):
        r = subprocess.run([_kiln_bin(), "run", "-m", tiny_gemma, "-p", "hi", "-n", "2",
                            "--threads", "2", "--max-graph-bs", "2", "--log-level", "info",
                            "--cache-max-gb", bound_gb], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, KILN_CACHE_DIR=str(cache)))
        assert r.returncode == 0, r.stderr
        return r.stdout + r.stderr

    stale = [cache / "0123456789abcdef.kpw", cache / "tp2-rank1" / "fedcba9876543210.kgc"]
    for i, path in enumerate(stale):
        path.write_bytes(b"x" * 200_000)
        age([path], i + 2)
    keep = cache / "notes.txt"  # not a cache entry
    keep.write_text("mine")
    # A bound of ~1 KiB: every stale entry goes; this run's plans and packed weights, above the
    # bound on their own, stay, and the next run starts warm from them.
    log = run("0.000001")
    assert not any(p.exists() for p in stale), log
    assert keep.exists()
    assert "removed 2 least recently used entries" in log, log
    mine = entries()
    assert any(n.endswith(".kpw") for n in mine) and any(n.endswith(".kgc") for n in mine), mine
    # Aged a day: only what the next run uses again (a hit refreshes an entry) keeps them.
    age([cache / n for n in mine], 1)
    log = run("0.000001")
    assert entries() == mine
    assert "least recently used" not in log, log
    # With no bound nothing is removed, however old.
    age([cache / n for n in mine], 30)
    run("0")
    assert entries() == mine


def test_cache_max_gb_rejects_negative(tiny_gemma):
    r = kiln("run", "-m", tiny_gemma, "-p", "hi", "-n", 1, "--cache-max-gb", "-1", timeout=60)
    assert r.returncode != 0 and "--cache-max-gb" in r.stderr


# ---- kiln logits ----

def test_logits_writes_one_row_per_position_equal_across_graph_modes(tiny_gemma, tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("2 17 33 41 5 9")
    rows = {}
    for mode in ("off", "optimize"):
        out = tmp_path / f"{mode}.f32"
        r = kiln("logits", "-m", tiny_gemma, "--ids", ids, "-o", out, "--graph-mode", mode,
                 "--threads", 2, timeout=120)
        assert r.returncode == 0, r.stderr
        info = json.loads(r.stdout)
        assert info["positions"] == 6
        rows[mode] = out.read_bytes()
        assert len(rows[mode]) == 6 * info["vocab"] * 4
    assert rows["off"] == rows["optimize"]


def test_logits_rejects_bad_id_files(tiny_gemma, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2 x")
    r = kiln("logits", "-m", tiny_gemma, "--ids", bad, "-o", tmp_path / "o.f32", timeout=60)
    assert r.returncode != 0 and "token ids" in r.stderr
    bad.write_text("1 99999999")
    r = kiln("logits", "-m", tiny_gemma, "--ids", bad, "-o", tmp_path / "o.f32", timeout=60)
    assert r.returncode != 0 and ">= vocab size" in r.stderr
