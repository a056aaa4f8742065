"""lm-evaluation-harness (PyPI `lm-eval`, model type local-completions) against `kiln serve`
on a tiny model: one generate_until and one loglikelihood task built from local GSM8K data by
scripts/lm_eval_tasks.py, a few documents each. lm-eval uses the server as its tokenizer
(/tokenizer_info, /tokenize, /detokenize) and sends token-id prompts; its logged
log-likelihoods must equal the server's own prompt scores for the same tokens, and its
generations the server's greedy completions."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import requests

from kiln_server import REPO



GSM8K = REPO / "data" / "gsm8k" / "train.jsonl"  # committed with the repository (MIT)


@pytest.fixture(scope="module")
def server(server_factory, gemma):
    # Few-shot GSM8K prompts run to thousands of tokens on the tiny models' small vocabulary.
    return server_factory(gemma, "--context-length", "8192", name="lm_eval")


@pytest.fixture(scope="module")
def lm_eval_run(server, tmp_path_factory):
    d = tmp_path_factory.mktemp("lm_eval")
    subprocess.run([sys.executable, str(REPO / "scripts" / "lm_eval_tasks.py"), str(d / "tasks"),
                    str(GSM8K), "--docs", "20"], check=True, capture_output=True)
    model = requests.get(server.url + "/v1/models", timeout=30).json()["data"][0]["id"]
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    lm_eval = pathlib.Path(sys.executable).parent / "lm_eval"
    r = subprocess.run([str(lm_eval), "--model", "local-completions", "--model_args",
                        f"base_url={server.url}/v1/completions,model={model},num_concurrent=2,"
                        "max_retries=1",
                        "--include_path", str(d / "tasks"),
                        "--tasks", "gsm8k_local,gsm8k_mc_local", "--limit", "3",
                        "--num_fewshot", "2",
                        "--output_path", str(d / "out"), "--log_samples"],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    results = next((d / "out").rglob("results_*.json"))
    samples = {p.name.split("_2")[0]: [json.loads(x) for x in p.read_text().splitlines()]
               for p in (d / "out").rglob("samples_*.jsonl")}
    return json.loads(results.read_text()), samples, r.stdout


def samples_of(samples, task):
    return next(v for k, v in samples.items() if k.startswith(f"samples_{task}"))


def test_both_tasks_report_metrics(lm_eval_run):
    results, _, table = lm_eval_run
    assert "exact_match,strict-match" in results["results"]["gsm8k_local"]
    assert "acc,none" in results["results"]["gsm8k_mc_local"]
    assert "gsm8k_local" in table and "gsm8k_mc_local" in table


def tokenize(server, text):
    return requests.post(server.url + "/tokenize", json={"prompt": text,
                                                        "add_special_tokens": False},
                         timeout=30).json()["tokens"]


def test_loglikelihoods_equal_the_servers_prompt_scores(lm_eval_run, server):
    _, samples, _ = lm_eval_run
    mc = samples_of(samples, "gsm8k_mc_local")
    assert len(mc) == 3
    for s in mc[:2]:
        args = [(a["arg_0"], a["arg_1"]) for a in s["arguments"].values()]
        assert len(args) == 4
        for (context, continuation), resp in zip(args, s["resps"]):
            ctx, cont = tokenize(server, context), tokenize(server, continuation)
            out = server.generate({"input_ids": ctx + cont, "return_logprob": True,
                                   "logprob_start_len": len(ctx),
                                   "sampling_params": {"max_new_tokens": 0}})
            ll = sum(t[0] for t in out["meta_info"]["input_token_logprobs"])
            assert float(resp[0][0]) == pytest.approx(ll, rel=1e-4, abs=1e-3)


def test_generations_equal_the_servers_greedy_completions(lm_eval_run, server):
    _, samples, _ = lm_eval_run
    gen = [s for s in samples_of(samples, "gsm8k_local") if s["filter"] == "strict-match"]
    assert len(gen) == 3
    s = gen[0]
    context, kwargs = s["arguments"]["gen_args_0"]["arg_0"], s["arguments"]["gen_args_0"]["arg_1"]
    out = server.generate({"input_ids": tokenize(server, context), "sampling_params": {
        "max_new_tokens": kwargs["max_gen_toks"], "temperature": 0, "stop": kwargs["until"]}})
    assert s["resps"][0][0] == out["text"]
