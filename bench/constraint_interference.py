#!/usr/bin/env python3
"""How much JSON-constrained requests slow everyone else: one unconstrained "victim" stream
(greedy, ignore_eos) runs next to N background requests that stay inside a permissive pattern
(`{"type": "string", "pattern": "^[^<>]*$"}`: every step's mask needs the whole vocabulary walk
unless it is cached), against the same N background requests unconstrained. Background
workers resubmit as soon as a request ends, so N stay in flight for the victim's whole run.
Loads alternate over several rounds on one server; the report gives the victim's median
inter-token gap per load (median and spread over rounds) and their ratio, plus the server's
step-time metrics.

Usage: bench/constraint_interference.py [--model PATH] [--loads 8,32] [--rounds 3]
Starts `build/release/kiln serve` on the default model (scripts/default_model.py) itself.
"""
import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import threading
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parents[1]
PATTERN = {"type": "string", "pattern": "^[^<>]*$"}
PROMPT = "Write a long, friendly letter to a friend about your holidays by the sea."


def default_model():
    return subprocess.check_output([sys.executable, str(ROOT / "scripts/default_model.py")],
                                   text=True).strip()


def cpu_name():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def chat(url, constrained, max_tokens, stop_flag):
    # /v1/completions: the default model's file has no chat template.
    body = {"prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0.8}
    if constrained:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "letter", "schema": PATTERN}}
    while not stop_flag.is_set():
        r = requests.post(url + "/v1/completions", json=body, timeout=600)
        r.raise_for_status()


def victim_gaps(url, max_tokens):
    body = {"text": PROMPT, "stream": True,
            "sampling_params": {"temperature": 0, "max_new_tokens": max_tokens, "ignore_eos": True}}
    arrivals = []
    with requests.post(url + "/generate", json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith(b"data:") and b"[DONE]" not in line:
                arrivals.append(time.perf_counter())
    return [b - a for a, b in zip(arrivals[1:], arrivals[2:])]  # from the second token on


def run_load(url, n, constrained, victim_tokens, bg_tokens):
    stop = threading.Event()
    workers = [threading.Thread(target=chat, args=(url, constrained, bg_tokens, stop), daemon=True)
               for _ in range(n)]
    for w in workers:
        w.start()
    time.sleep(2.0)  # let the background requests get past their prompts
    gaps = victim_gaps(url, victim_tokens)
    stop.set()
    for w in workers:
        w.join()
    return statistics.median(gaps) * 1e3, max(gaps) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--loads", default="8,32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--victim-tokens", type=int, default=48)
    ap.add_argument("--background-tokens", type=int, default=64)
    ap.add_argument("--port", type=int, default=31750)
    args = ap.parse_args()
    model = args.model or default_model()
    url = f"http://127.0.0.1:{args.port}"
    server = subprocess.Popen([str(ROOT / "build/release/kiln"), "serve", "-m", model, "--port",
                               str(args.port), "--threads", str(args.threads)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                if requests.get(url + "/health", timeout=1).ok:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(1)
        print(f"host: {cpu_name()}, {os.cpu_count()} cores; model {pathlib.Path(model).name}, "
              f"{args.threads} threads; victim greedy {args.victim_tokens} tokens; background "
              f"temperature 0.8, {args.background_tokens} tokens, resubmitted")
        for n in [int(x) for x in args.loads.split(",")]:
            medians = {True: [], False: []}
            worst = {True: 0.0, False: 0.0}
            for rnd in range(args.rounds):
                order = (True, False) if rnd % 2 == 0 else (False, True)
                for constrained in order:
                    med, mx = run_load(url, n, constrained, args.victim_tokens,
                                       args.background_tokens)
                    medians[constrained].append(med)
                    worst[constrained] = max(worst[constrained], mx)
                    print(f"  {n} background, {'pattern' if constrained else 'free'}, round "
                          f"{rnd + 1}: victim median gap {med:.1f} ms (max {mx:.0f} ms)",
                          flush=True)
            c, f = statistics.median(medians[True]), statistics.median(medians[False])
            print(f"== {n} background requests: victim median gap {c:.1f} ms under the pattern "
                  f"[{min(medians[True]):.1f}, {max(medians[True]):.1f}] vs {f:.1f} ms "
                  f"unconstrained [{min(medians[False]):.1f}, {max(medians[False]):.1f}]: "
                  f"{c / f:.2f}x (max gap {worst[True]:.0f} vs {worst[False]:.0f} ms)")
        metrics = requests.get(url + "/metrics", timeout=10).text
        for line in metrics.splitlines():
            if line.startswith(("kiln_step_seconds_total", "kiln_json_mask")):
                print("  " + line)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
