#!/usr/bin/env python3
"""Writes two lm-evaluation-harness tasks built from a local GSM8K train.jsonl (MIT), for
running `lm_eval --model local-completions` against `kiln serve` where no dataset can be
downloaded:

- gsm8k_local (generate_until): GSM8K word problems, 5-shot "Question: ...\\nAnswer: ..."
  prompts, exact match on the final number (GSM8K's "#### N" line, or the last number).
- gsm8k_mc_local (loglikelihood, multiple choice): the same problems with four candidate final
  answers, the true one and three distractors derived from it; accuracy by the highest
  log-likelihood of " N" after "Answer:".

The first 100 problems are the few-shot pool; evaluation documents come after them. These are
training problems: the figures are for comparing engines and modes, not for a leaderboard.

Usage: lm_eval_tasks.py OUTDIR GSM8K_TRAIN_JSONL [--docs N]
Then: lm_eval --model local-completions --include_path OUTDIR --tasks gsm8k_local,gsm8k_mc_local
"""
import argparse
import json
import pathlib
import random

FEWSHOT = 100

GEN_TASK = """task: gsm8k_local
dataset_path: json
dataset_kwargs:
  data_files:
    train: {fewshot}
    test: {docs}
training_split: train
fewshot_split: train
test_split: test
output_type: generate_until
num_fewshot: 5
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
target_delimiter: " "
fewshot_delimiter: "\\n\\n"
generation_kwargs:
  until: ["Question:", "\\n\\n"]
  do_sample: false
  temperature: 0.0
  max_gen_toks: 256
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
metadata:
  version: 1.0
"""

MC_TASK = """task: gsm8k_mc_local
dataset_path: json
dataset_kwargs:
  data_files:
    train: {fewshot}
    test: {docs}
training_split: train
fewshot_split: train
test_split: test
output_type: multiple_choice
num_fewshot: 3
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
fewshot_delimiter: "\\n\\n"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def final_answer(answer: str) -> str:
    return answer.split("####")[-1].strip().replace(",", "")


def distractors(true: str, rng: random.Random) -> list:
    """Three other numbers near the true answer (plausible slips: off by a bit, doubled)."""
    try:
        n = int(true)
    except ValueError:
        n = int(float(true))
    pool = {n + 1, n - 1, n + 10, n * 2, n + 2, max(n // 2, 0), n - 10, n * 10}
    pool.discard(n)
    return [str(x) for x in rng.sample(sorted(pool), 3)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", type=pathlib.Path)
    ap.add_argument("gsm8k_train_jsonl", type=pathlib.Path)
    ap.add_argument("--docs", type=int, default=400, help="evaluation documents (default 400)")
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.gsm8k_train_jsonl.open()]
    assert len(rows) > FEWSHOT + args.docs, "not enough problems in the file"
    rng = random.Random(1234)
    args.outdir.mkdir(parents=True, exist_ok=True)

    def mc(row):
        true = final_answer(row["answer"])
        choices = [true] + distractors(true, rng)
        rng.shuffle(choices)
        return {"question": row["question"], "answer": row["answer"],
                "choices": [" " + c for c in choices], "label": choices.index(true)}

    files = {}
    for name, part in (("fewshot", rows[:FEWSHOT]), ("docs", rows[FEWSHOT:FEWSHOT + args.docs])):
        gen = args.outdir / f"gsm8k_{name}.jsonl"
        gen.write_text("".join(json.dumps({"question": r["question"], "answer": r["answer"]}) + "\n"
                               for r in part))
        mcf = args.outdir / f"gsm8k_mc_{name}.jsonl"
        mcf.write_text("".join(json.dumps(mc(r)) + "\n" for r in part))
        files[name] = (gen.resolve(), mcf.resolve())
    (args.outdir / "gsm8k_local.yaml").write_text(
        GEN_TASK.format(fewshot=files["fewshot"][0], docs=files["docs"][0]))
    (args.outdir / "gsm8k_mc_local.yaml").write_text(
        MC_TASK.format(fewshot=files["fewshot"][1], docs=files["docs"][1]))
    print(f"wrote gsm8k_local and gsm8k_mc_local to {args.outdir}")


if __name__ == "__main__":
    main()
