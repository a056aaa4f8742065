#!/usr/bin/env python3
"""Tool calling on a real model: the 60 prompts of bench/prompts/tool_calls/cases.json (single
calls, parallel calls, a call after a tool result, prompts that need none) sent one at a time
to an OpenAI-compatible server with the official `openai` client, greedy, tool_choice "auto".

  run --url URL --engine NAME --out FILE.jsonl   one server's replies, with latencies
  report FILE.jsonl...                           the comparison table

Each call is checked with the `jsonschema` package (draft 2020-12 with its format checker, so
`format` counts): the name is one of the tools and the arguments parse and validate. Agreement
with the expected behaviour: whether a call was made at all, and whether the called names
(as a multiset) are the expected ones.
"""
import argparse
import json
import pathlib
import statistics
import sys
import time

import jsonschema
import openai

CASES = pathlib.Path(__file__).resolve().parent / "prompts" / "tool_calls" / "cases.json"


def load_cases():
    data = json.loads(CASES.read_text())
    return data["tools"], data["cases"]


def run(args):
    tools, cases = load_cases()
    client = openai.OpenAI(base_url=args.url + "/v1", api_key="unused", max_retries=0,
                           timeout=600)
    model = client.models.list().data[0].id
    with open(args.out, "w") as out:
        for case in cases:
            record = {"engine": args.engine, "id": case["id"], "kind": case["kind"]}
            t0 = time.perf_counter()
            try:
                r = client.chat.completions.create(
                    model=model, messages=case["messages"], tools=tools, tool_choice="auto",
                    temperature=0, max_tokens=args.max_tokens)
                ch = r.choices[0]
                record.update(
                    finish_reason=ch.finish_reason, content=ch.message.content,
                    calls=[{"name": c.function.name, "arguments": c.function.arguments}
                           for c in (ch.message.tool_calls or [])],
                    completion_tokens=r.usage.completion_tokens if r.usage else None)
            except openai.APIError as e:
                record["error"] = f"{type(e).__name__}: {getattr(e, 'message', e)}"
            record["seconds"] = time.perf_counter() - t0
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(f"{args.engine} {case['id']}: "
                  f"{[c['name'] for c in record.get('calls', [])] or record.get('error', '-')} "
                  f"{record['seconds']:.1f}s", file=sys.stderr)


def check_call(call, schemas):
    """None when the call is valid, else why not."""
    if call["name"] not in schemas:
        return f"unknown function {call['name']!r}"
    try:
        arguments = json.loads(call["arguments"])
    except json.JSONDecodeError as e:
        return f"arguments do not parse: {e}"
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    errors = list(jsonschema.Draft202012Validator(schemas[call["name"]],
                                                  format_checker=checker).iter_errors(arguments))
    return f"{errors[0].message}" if errors else None


def report(args):
    tools, cases = load_cases()
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    missing = [f for f in ("date", "date-time", "email", "ipv4") if f not in checker.checkers]
    assert not missing, f"jsonschema cannot check {missing} (install rfc3339-validator)"
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    expected = {c["id"]: sorted(c["expect"]) for c in cases}
    kinds = sorted({c["kind"] for c in cases})
    rows = []
    for path in args.files:
        records = [json.loads(line) for line in open(path)]
        engine = records[0]["engine"]
        calls = valid = errors = call_agree = names_agree = 0
        by_kind = {k: [0, 0] for k in kinds}  # names agree, cases
        invalid = []
        seconds = [r["seconds"] for r in records if "error" not in r]
        tokens = sum(r.get("completion_tokens") or 0 for r in records)
        for r in records:
            want = expected[r["id"]]
            if "error" in r:
                errors += 1
                invalid.append(f"{r['id']}: request failed: {r['error'][:160]}")
                by_kind[r["kind"]][1] += 1
                continue
            made = sorted(c["name"] for c in r["calls"])
            for c in r["calls"]:
                calls += 1
                why = check_call(c, schemas)
                if why is None:
                    valid += 1
                else:
                    invalid.append(f"{r['id']}: {c['name']} {c['arguments'][:120]}: {why[:120]}")
            if "<tool_call>" in (r.get("content") or ""):
                invalid.append(f"{r['id']}: a call left unparsed in the content")
            call_agree += bool(made) == bool(want)
            names_agree += made == want
            by_kind[r["kind"]][0] += made == want
            by_kind[r["kind"]][1] += 1
        rows.append(dict(engine=engine, cases=len(records), errors=errors, calls=calls,
                         valid=valid, call_agree=call_agree, names_agree=names_agree,
                         by_kind=by_kind, invalid=invalid, seconds=seconds, tokens=tokens))
    print("| engine | requests failed | calls | calls valid (jsonschema) | call/no-call agrees |"
          " called names agree | " + " | ".join(f"names agree: {k}" for k in kinds) +
          " | latency median (min-max) s | total s | output tok/s |")
    print("|---" * (9 + len(kinds)) + "|")
    for w in rows:
        s = w["seconds"]
        pct = 100.0 * w["valid"] / w["calls"] if w["calls"] else float("nan")
        print(f"| {w['engine']} | {w['errors']}/{w['cases']} | {w['calls']} | {w['valid']} "
              f"({pct:.1f}%) | {w['call_agree']}/{w['cases']} | {w['names_agree']}/{w['cases']} | "
              + " | ".join(f"{a}/{n}" for a, n in w["by_kind"].values()) +
              f" | {statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f}) | {sum(s):.0f} | "
              f"{w['tokens'] / sum(s):.1f} |")
    for w in rows:
        if w["invalid"]:
            print(f"\n{w['engine']}: {len(w['invalid'])} problems")
            for line in w["invalid"]:
                print("  " + line)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--url", required=True)
    r.add_argument("--engine", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--max-tokens", type=int, default=384)
    p = sub.add_parser("report")
    p.add_argument("files", nargs="+")
    args = ap.parse_args()
    run(args) if args.cmd == "run" else report(args)


if __name__ == "__main__":
    main()
