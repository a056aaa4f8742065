"""`kiln eval gsm8k` and `kiln bench serving` against a running server."""
import json
import re
import subprocess

from kiln_server import kiln_bin


def test_eval_gsm8k(server, tmp_path):
    data = tmp_path / "gsm8k.jsonl"
    rows = [{"question": f"What is {i} plus {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"}
            for i in range(1, 9)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out_jsonl = tmp_path / "results.jsonl"
    for api in ("native", "openai"):
        r = subprocess.run([kiln_bin(), "eval", "gsm8k", "--url", server.url, "--api", api,
                            "--data-path", str(data), "--num-shots", "2", "--num-questions", "4",
                            "--parallel", "3", "--max-new-tokens", "16",
                            "--output-jsonl", str(out_jsonl)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.strip().splitlines()
        assert re.fullmatch(r"Accuracy: \d\.\d{3}", lines[0]), r.stdout
        assert re.fullmatch(r"Invalid: \d\.\d{3}", lines[1])
        assert re.fullmatch(r"Latency: \d+\.\d{3} s", lines[2])
        assert re.fullmatch(r"Output throughput: \d+\.\d{3} token/s", lines[3])
        results = [json.loads(l) for l in out_jsonl.read_text().splitlines()]
        assert [x["index"] for x in results] == [2, 3, 4, 5]  # questions follow the shots
        assert all(x["label"] == str(2 * (x["index"] + 1)) for x in results)
        assert all(0 < x["completion_tokens"] <= 16 for x in results)


def test_bench_serving_compares_two_servers_in_alternating_rounds(server, server_factory, gemma,
                                                                  tmp_path):
    eager = server_factory(gemma, "--graph-mode", "off", name="eager-for-compare")
    out = tmp_path / "compare.json"
    r = subprocess.run([kiln_bin(), "bench", "serving", "--url", eager.url, "--compare-url",
                        server.url, "--rounds", "3", "--num-prompts", "6", "--input-len", "8",
                        "--output-len", "4", "--max-concurrency", "3", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.strip()[:1].isdigit()]
    assert [x.split()[1] for x in lines] == ["A", "B", "A"]  # who went first, alternating
    assert "medians over 3 rounds" in r.stdout
    res = json.loads(out.read_text())
    assert len(res["b_over_a"]) == 3 and all(x > 0 for x in res["b_over_a"])
    r = subprocess.run([kiln_bin(), "bench", "serving", "--url", server.url, "--rounds", "2"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--rounds needs --compare-url" in r.stderr


def test_bench_serving(server, tmp_path):
    out = tmp_path / "bench.json"
    for api in ("native", "openai"):
        r = subprocess.run([kiln_bin(), "bench", "serving", "--url", server.url, "--api", api,
                            "--num-prompts", "8", "--input-len", "16", "--output-len", "8",
                            "--max-concurrency", "4", "--json", str(out)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "Serving Benchmark Result" in r.stdout
        res = json.loads(out.read_text())
        assert res["completed"] == 8 and res["failed"] == 0
        assert res["total_output_tokens"] == 64
        assert res["total_input_tokens"] >= 8 * 16
        assert res["ttft_ms"]["mean"] > 0 and res["itl_ms"]["mean"] > 0
        assert res["tpot_ms"]["median"] > 0
