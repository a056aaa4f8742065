"""Decode speed under grammars against one OpenAI-compatible server (kiln serve or llama-server):
each grammar of tests/fixtures/grammars as a GBNF `grammar` field (both engines take it on
/v1/completions), and unconstrained, at batch 1 (one stream) and batch 8 (eight concurrent
streams), temperature 1 with fixed seeds. Decode tok/s counts the tokens after the first over the
time from the first token to the last, so prefill and the grammar's compile are left out. Every
output is kept: the report also counts, per engine and grammar, the outputs that finished
("stop") and how many of them Lark parses under the same grammar (tests/e2e/grammar_to_lark.py),
the oracle of the test suite on a real model.

  grammar_decode.py run --url URL --engine NAME --round K --out FILE.jsonl [--max-tokens N]
  grammar_decode.py report FILE.jsonl...   (medians and spread over rounds; slowdown per engine)
"""
import argparse
import json
import pathlib
import statistics
import sys
import threading
import time

import requests

GRAMMARS = pathlib.Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "grammars"
PROMPTS = {
    "unconstrained": "Write a short story about a lighthouse keeper.\n",
    "arithmetic": "Write a long arithmetic expression using + - * / and parentheses:\n",
    "json_subset": "Write a JSON object describing a book (title, year, authors, tags):\n",
    "sql_select": "Write a SQL query that selects the names of users older than 30:\n",
    "csv_row": "Write one CSV row with a name, a city, a date and a quoted comment:\n",
    "label_choice": "Classify the sentiment of: 'The food was cold but the staff were lovely.'\n",
    "python_signature": "Write the signature of a Python function that merges two sorted lists:\n",
    "nested_brackets": "Write a deeply nested list of x atoms using [ ] and ( ):\n",
}


def one_stream(url, name, seed, max_tokens, out):
    body = {"prompt": PROMPTS[name], "max_tokens": max_tokens, "temperature": 1.0,
            "seed": seed, "stream": True}
    if name != "unconstrained":
        body["grammar"] = (GRAMMARS / f"{name}.gbnf").read_text()
    times, start, text, finish = [], time.perf_counter(), [], None
    with requests.post(url + "/v1/completions", json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            event = json.loads(line[6:])
            choices = event.get("choices") or []
            if choices and choices[0].get("text"):
                times.append(time.perf_counter())
                text.append(choices[0]["text"])
            if choices and choices[0].get("finish_reason"):
                finish = choices[0]["finish_reason"]
    out.append({"start": start, "times": times, "text": "".join(text), "finish": finish})


def run(args):
    names = list(PROMPTS)
    with open(args.out, "a") as f:
        for name in names:
            for batch in (1, 8):
                results, threads = [], []
                for i in range(batch):
                    t = threading.Thread(target=one_stream, args=(
                        args.url, name, 1000 * args.round + i, args.max_tokens, results))
                    threads.append(t)
                    t.start()
                for t in threads:
                    t.join()
                tokens = sum(max(len(r["times"]) - 1, 0) for r in results)
                firsts = [r["times"][0] for r in results if r["times"]]
                lasts = [r["times"][-1] for r in results if r["times"]]
                span = max(lasts) - min(firsts) if firsts else 0.0
                rec = {"engine": args.engine, "round": args.round, "grammar": name,
                       "batch": batch, "tokens": tokens,
                       "tok_s": tokens / span if span > 0 else None,
                       "outputs": [[r["text"], r["finish"]] for r in results]}
                f.write(json.dumps(rec) + "\n")
                f.flush()
                print(json.dumps({k: v for k, v in rec.items() if k != "outputs"}),
                      file=sys.stderr)


def lark_counts(rows):
    """(engine, grammar) -> [finished outputs, of which Lark parses]."""
    sys.path.insert(0, str(GRAMMARS.parents[1] / "e2e"))
    import lark
    from grammar_to_lark import translate
    parsers, counts = {}, {}
    for r in rows:
        if r["grammar"] == "unconstrained":
            continue
        if r["grammar"] not in parsers:
            text = (GRAMMARS / f"{r['grammar']}.gbnf").read_text()
            parsers[r["grammar"]] = lark.Lark(translate(text), start="r_root", parser="earley",
                                              lexer="dynamic_complete")
        c = counts.setdefault((r["engine"], r["grammar"]), [0, 0])
        for text, finish in r.get("outputs", []):
            if finish != "stop":
                continue
            c[0] += 1
            try:
                parsers[r["grammar"]].parse(text)
                c[1] += 1
            except lark.exceptions.LarkError:
                pass
    return counts


def report(files):
    rows = [json.loads(l) for f in files for l in open(f) if l.strip()]
    by = {}
    for r in rows:
        if r["tok_s"]:
            by.setdefault((r["engine"], r["grammar"], r["batch"]), []).append(r["tok_s"])
    print("| engine | grammar | batch | decode tok/s (median) | spread (min-max) | "
          "vs unconstrained |")
    print("|---|---|---|---|---|---|")
    for (engine, grammar, batch), v in sorted(by.items()):
        base = by.get((engine, "unconstrained", batch))
        ratio = statistics.median(v) / statistics.median(base) if base else float("nan")
        print(f"| {engine} | {grammar} | {batch} | {statistics.median(v):.1f} | "
              f"{min(v):.1f}-{max(v):.1f} | {ratio:.2f}x |")
    print()
    print("| engine | grammar | finished outputs | parsed by Lark |")
    print("|---|---|---|---|")
    for (engine, grammar), (done, parsed) in sorted(lark_counts(rows).items()):
        print(f"| {engine} | {grammar} | {done} | {parsed} |")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--url", required=True)
    r.add_argument("--engine", required=True)
    r.add_argument("--round", type=int, default=1)
    r.add_argument("--out", required=True)
    r.add_argument("--max-tokens", type=int, default=128)
    rep = sub.add_parser("report")
    rep.add_argument("files", nargs="+")
    a = p.parse_args()
    run(a) if a.cmd == "run" else report(a.files)


if __name__ == "__main__":
    main()
