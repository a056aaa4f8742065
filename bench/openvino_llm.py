"""OpenVINO GenAI's LLMPipeline on one GGUF file, as bench/matrix_engine_vs_peers.sh runs it:
prompt tokens per second of a prefill of N tokens (time to first token with one new token) and
decode tokens per second at batch 1, on 2 inference threads, greedy. Prints one JSON line.

    python3 bench/openvino_llm.py MODEL.gguf --prompt-lens 512,4096 --decode-tokens 64

With --batch B (and --batch-input/--batch-output), its ContinuousBatchingPipeline instead runs B
prompts of that many tokens with that many new tokens each (min = max, greedy) in one generate
call, and reports the output tokens per second over the whole run (prefills included):
`batch_B_output_tok_s`.

OpenVINO reads the GGUF itself (its reader keeps Q4_K as int4 and expands Q6_K to f16) and runs
its defaults on this CPU: bf16 compute where AVX512_BF16/AMX-BF16 exist, AMX kernels for the
many-row products. The prompts are token ids cut from GSM8K questions (the same text for every
length), passed as ids so that both engines see exactly N prompt tokens.
"""

import argparse
import json
import time

import numpy as np
import openvino as ov
import openvino_genai as ovg


def prompt_ids(tokenizer, n):
    text = " ".join(json.loads(line)["question"] for line in open("data/gsm8k/train.jsonl"))
    ids = np.array(tokenizer.encode(text).input_ids.data)[:, :n]
    if ids.shape[1] < n:
        raise SystemExit(f"openvino_llm: only {ids.shape[1]} prompt tokens available, {n} asked")
    return ids.astype(np.int64)


def continuous_batch(a):
    """B prompts of batch_input tokens (different slices of the text) through one generate call of
    the ContinuousBatchingPipeline; output tokens per second over the whole call."""
    sched = ovg.SchedulerConfig()
    sched.max_num_seqs = a.batch
    sched.cache_size = 2  # GB of KV cache
    pipe = ovg.ContinuousBatchingPipeline(a.model, sched, "CPU",
                                          {"INFERENCE_NUM_THREADS": a.threads})
    tok = pipe.get_tokenizer()
    ids = prompt_ids(tok, a.batch_input * (a.batch + 1))
    prompts = [ov.Tensor(np.ascontiguousarray(ids[:, i * a.batch_input:(i + 1) * a.batch_input]))
               for i in range(a.batch)]
    cfg = ovg.GenerationConfig()
    cfg.do_sample = False
    cfg.max_new_tokens = 2
    pipe.generate(prompts[:2], [cfg] * 2)  # warm-up: compiles kernels
    cfg.max_new_tokens = a.batch_output
    cfg.min_new_tokens = a.batch_output
    t0 = time.time()
    results = pipe.generate(prompts, [cfg] * a.batch)
    seconds = time.time() - t0
    produced = sum(len(r.m_generation_ids[0]) for r in results)
    return {f"batch_{a.batch}_output_tok_s": round(produced / seconds, 1),
            "batch_seconds": round(seconds, 2), "batch_output_tokens": produced}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--prompt-lens", default="512,4096")
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--batch-input", type=int, default=128)
    ap.add_argument("--batch-output", type=int, default=64)
    a = ap.parse_args()
    if a.batch > 0:
        print(json.dumps(continuous_batch(a)))
        return
    t0 = time.time()
    pipe = ovg.LLMPipeline(a.model, "CPU", INFERENCE_NUM_THREADS=a.threads)
    out = {"load_seconds": round(time.time() - t0, 2)}
    tok = pipe.get_tokenizer()
    cfg = ovg.GenerationConfig()
    cfg.do_sample = False
    # Warm-up: the first generate compiles kernels.
    cfg.max_new_tokens = 2
    pipe.generate(ov.Tensor(prompt_ids(tok, 64)), cfg)
    for n in [int(x) for x in a.prompt_lens.split(",")]:
        cfg.max_new_tokens = 1
        r = pipe.generate(ov.Tensor(prompt_ids(tok, n)), cfg)
        ttft_ms = r.perf_metrics.get_ttft().mean
        out[f"prefill_{n}_tok_s"] = round(n / (ttft_ms / 1000.0), 1)
    cfg.max_new_tokens = a.decode_tokens
    cfg.min_new_tokens = a.decode_tokens
    r = pipe.generate(ov.Tensor(prompt_ids(tok, 128)), cfg)
    out["decode_bs1_tok_s"] = round(1000.0 / r.perf_metrics.get_tpot().mean, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
