"""The matrix engine (AMX) changes no token: with its tiles (the default where usable) kiln gives
what the AVX-512 tier gives (KILN_ISA=avx512) in prefill, batched decode (eager and graph) and
perplexity windows; and the start-up log says which tier runs and why AMX is off where it is.
The opt-in bf16 contract (KILN_MATMUL_CONTRACT=bf16) has bits of its own, and keeps graph ==
eager and batch invariance."""
import json
import os
import re
import subprocess

import pytest

from kiln_server import kiln_bin


def cpu_flags() -> set:
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


AVX512_TIER = {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni", "avx512_bf16"}
# Linux lists the AMX flags only where it enables the tile state; it grants it on request.
AMX_HERE = AVX512_TIER | {"amx_tile", "amx_int8"} <= cpu_flags()


def kiln(isa: str, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([kiln_bin(), *args], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "KILN_ISA": isa})
    assert r.returncode == 0, f"kiln {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}"
    return r


def kernels_line(isa: str, gemma) -> str:
    r = kiln(isa, "run", "-m", str(gemma), "-p", "hi", "-n", "2", "-t", "2", "--log-level", "info")
    lines = [l for l in (r.stdout + r.stderr).splitlines() if "matmul kernels:" in l]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_startup_log_names_the_tier_and_why_amx_is_off(gemma):
    line = kernels_line("avx2", gemma)
    assert re.search(r"matmul kernels: (avx2|scalar), AMX off \(.+\)", line), line
    line = kernels_line("amx", gemma)
    assert re.search(r"matmul kernels: (avx512|avx2|scalar), AMX (on|off \(.+\))", line), line
    if AMX_HERE:
        assert "AMX on" in line, line
        assert "AMX off (KILN_ISA=avx512)" in kernels_line("avx512", gemma)


@pytest.mark.skipif(not AMX_HERE, reason="this CPU has no AVX-512 tier with AMX-TILE/AMX-INT8")
def test_amx_and_avx512_tiers_give_the_same_tokens_and_perplexity(gemma, tmp_path):
    text = tmp_path / "text.txt"
    text.write_text(" ".join(f"word{i % 37} and {i * 7 % 101} more" for i in range(400)))
    out = {}
    for isa in ("amx", "avx512"):
        js = tmp_path / f"{isa}.json"
        # 12 sequences of 40-token prompts: prefill of 480 rows (AMX tiles), decode of 12.
        kiln(isa, "bench", "-m", str(gemma), "-t", "2", "--batch-sizes", "12", "--input-len", "40",
             "--output-len", "8", "--modes", "eager,graph", "--no-bandwidth-probe",
             "--json", str(js))
        res = json.loads(js.read_text())["results"][0]
        assert res["eager"]["tokens"] == res["graph"]["tokens"], isa
        # Perplexity windows of 64 tokens are scored in one prefill each (AMX tiles): every
        # window's figure and the total, to 4 and 6 decimals, on each tier.
        ppl = kiln(isa, "perplexity", "-m", str(gemma), "-f", str(text), "-c", "64", "-t", "2")
        out[isa] = (res["graph"]["tokens"], ppl.stdout)
        tier = json.loads(js.read_text())["config"]["isa"]
        assert tier == ("avx512+amx" if isa == "amx" else "avx512")
    assert out["amx"][0] == out["avx512"][0]
    assert '"chunks"' in out["amx"][1]
    assert out["amx"][1] == out["avx512"][1]


BF16_HERE = AMX_HERE and "amx_bf16" in cpu_flags()


@pytest.mark.skipif(not BF16_HERE, reason="this CPU has no AVX-512 tier with AMX-BF16")
def test_bf16_contract_keeps_graph_equal_to_eager_and_batch_invariance(gemma, server_factory,
                                                                       monkeypatch):
    """KILN_MATMUL_CONTRACT=bf16: the log names it; a request's greedy tokens are the same alone,
    in a batch of 8 and in a batch of 32 (its rows then in 16-row tiles with others'), and an
    eager server gives a graph server's tokens under concurrent load."""
    monkeypatch.setenv("KILN_ISA", "amx")
    monkeypatch.setenv("KILN_MATMUL_CONTRACT", "bf16")
    r = subprocess.run([kiln_bin(), "run", "-m", str(gemma), "-p", "hi", "-n", "2", "-t", "2",
                        "--log-level", "info"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert re.search(r"matmul kernels: avx512, AMX on, contract bf16", r.stdout + r.stderr), \
        r.stderr
    params = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}
    prompts = [f"Prompt number {i}: " + "word " * (i % 7) for i in range(31)]
    target = "Batch invariance target prompt"
    outs = {}
    for mode in ("optimize", "off"):
        server = server_factory(gemma, "--graph-mode", mode, name=f"bf16-graph-{mode}")
        try:
            alone = server.generate({"text": target, "sampling_params": params})["output_ids"]
            batch8 = server.generate({"text": [target] + prompts[:7], "sampling_params": params})
            batch32 = server.generate({"text": prompts + [target], "sampling_params": params})
            assert batch8[0]["output_ids"] == alone, mode
            assert batch32[-1]["output_ids"] == alone, mode
            outs[mode] = [o["output_ids"] for o in batch32]
            server.assert_all_pages_free()
        finally:
            assert server.stop() == 0
    assert outs["optimize"] == outs["off"]


def test_unknown_matmul_contract_is_a_clear_error(gemma):
    r = subprocess.run([kiln_bin(), "run", "-m", str(gemma), "-p", "hi", "-n", "2"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "KILN_MATMUL_CONTRACT": "bf61"})
    assert r.returncode != 0
    assert "KILN_MATMUL_CONTRACT='bf61' is not a matmul contract: int8 (the default) or bf16" \
        in r.stderr, r.stderr
