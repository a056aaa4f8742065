"""The server's greedy tokens equal `kiln run`'s, eager equals graph mode under concurrent load,
and a request's tokens do not depend on the batch it shares."""
import concurrent.futures as cf
import subprocess

from kiln_server import kiln_bin

PARAMS = {"temperature": 0, "max_new_tokens": 16, "ignore_eos": True}
PROMPTS = [f"Prompt number {i}: " + "word " * (i % 7) for i in range(16)]


def greedy_all(server, prompts, params=PARAMS):
    with cf.ThreadPoolExecutor(len(prompts)) as pool:
        outs = list(pool.map(lambda p: server.generate({"text": p, "sampling_params": params}),
                             prompts))
    return [o["output_ids"] for o in outs]


def test_server_equals_kiln_run(server, gemma):
    prompt = "The quick brown fox"
    out = server.generate({"text": prompt, "sampling_params": PARAMS})
    run = subprocess.run([kiln_bin(), "run", "-m", str(gemma), "-p", prompt, "-n", "16",
                          "--ignore-eos", "--threads", "2", "--max-graph-bs", "8"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip("\n") == out["text"]


def test_eager_equals_graph_under_load(server, server_factory, gemma):
    graph = greedy_all(server, PROMPTS)
    eager_server = server_factory(gemma, "--graph-mode", "off", name="eager")
    try:
        eager = greedy_all(eager_server, PROMPTS)
        assert eager_server.metrics()["kiln_graph_steps_total"] == 0
    finally:
        assert eager_server.stop() == 0
    assert eager == graph


def test_batch_invariance(server):
    target = "Batch invariance target prompt"
    alone = server.generate({"text": target, "sampling_params": PARAMS})["output_ids"]
    # In a batch of 8 unrelated prompts (one native batch request: one scheduling wave).
    batch8 = server.generate({"text": [target] + PROMPTS[:7], "sampling_params": PARAMS})
    assert batch8[0]["output_ids"] == alone
    # In a batch of 32 that shares its prefix, once the target is already in the prefix cache.
    shared = [target + f" variant {i}" for i in range(31)]
    batch32 = server.generate({"text": shared + [target], "sampling_params": PARAMS})
    assert batch32[-1]["meta_info"]["cached_tokens"] > 0
    assert batch32[-1]["output_ids"] == alone
    server.assert_all_pages_free()
