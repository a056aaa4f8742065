"""kiln's grammar automaton against parsers it did not write, with no model: every string over a
small alphabet (characters or short pieces) up to a small length is accepted by
`kiln grammar-check` exactly when Lark (Earley) accepts it under the same grammar translated to
Lark's syntax (grammar_to_lark.py), for each grammar of tests/fixtures/grammars; SGLang regexes
against Python's re.fullmatch the same way. And kiln's "reject" means no continuation exists:
no longer string that extends a rejected one is accepted.
"""
import itertools
import json
import pathlib
import re
import subprocess

import lark
import pytest

from grammar_to_lark import translate
from kiln_server import kiln_bin

GRAMMARS = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "grammars"

# Per grammar: the alphabet (characters or pieces) and the most pieces a string has.
ALPHABETS = {
    "arithmetic": (list("1+(*)-"), 5),
    "json_subset": (list('{}[]"a:1,'), 4),
    "sql_select": (["SELECT *", "SELECT a", " FROM a", " WHERE a = 1", ";", ", b", " LIMIT 5",
                    "x"], 4),
    "csv_row": (list('a,"\n'), 6),
    "label_choice": (["positive", "neg", "ative", "negative", "neutral", "not", " sure", "x",
                      "mixed"], 3),
    "python_signature": (["def f", "(", ")", ":", "x: int", ", ", " -> int", "[", "]"], 4),
    "nested_brackets": (list("[]x,()"), 5),
}


def strings(alphabet, most):
    out = {""}
    for n in range(1, most + 1):
        out.update("".join(p) for p in itertools.product(alphabet, repeat=n))
    return sorted(out)


def kiln_verdicts(args, inputs):
    run = subprocess.run([kiln_bin(), "grammar-check", *args],
                         input="".join(json.dumps(s) + "\n" for s in inputs),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    verdicts = run.stdout.split()
    assert len(verdicts) == len(inputs)
    return dict(zip(inputs, verdicts))


def lark_parser(text):
    return lark.Lark(translate(text), start="r_root", parser="earley",
                     lexer="dynamic_complete")


def lark_accepts(parser, s):
    try:
        parser.parse(s)
        return True
    except lark.exceptions.LarkError:
        return False


def check_rejections_are_final(verdicts):
    """A rejected string has no accepted extension (the automaton refuses at the first byte that
    leaves the language, and only there)."""
    rejected = [s for s, v in verdicts.items() if v == "reject"]
    for s, v in verdicts.items():
        if v != "reject":
            for r in rejected:
                assert not (len(r) < len(s) and s.startswith(r)), (r, s)


@pytest.mark.parametrize("name", sorted(ALPHABETS))
def test_every_short_string_agrees_with_lark(name):
    path = GRAMMARS / f"{name}.gbnf"
    text = path.read_text()
    parser = lark_parser(text)
    inputs = strings(*ALPHABETS[name])
    accepted = {s for s in inputs if lark_accepts(parser, s)}
    assert accepted, name  # the alphabet reaches some sentence
    for dialect in ("gbnf", "ebnf"):
        verdicts = kiln_verdicts(["--grammar", str(path), "--dialect", dialect], inputs)
        disagree = [s for s in inputs if (verdicts[s] == "accept") != (s in accepted)]
        assert not disagree, [(s, verdicts[s]) for s in disagree[:10]]
        # Whatever Lark accepts kiln accepts, so every prefix of it must be a live prefix.
        for s in accepted:
            for k in range(len(s)):
                assert verdicts.get(s[:k], "prefix") != "reject", (s[:k], s)
        check_rejections_are_final(verdicts)


def test_fifty_deep_brackets():
    path = GRAMMARS / "nested_brackets.gbnf"
    parser = lark_parser(path.read_text())
    deep = "[" * 50 + "x" + "]" * 50
    mixed = "".join("[(" if i % 2 else "(" for i in range(50)) + "x"
    mixed += "".join(")]" if i % 2 else ")" for i in reversed(range(50)))
    unbalanced = "[" * 50 + "x" + "]" * 49
    v = kiln_verdicts(["--grammar", str(path)], [deep, mixed, unbalanced, deep + "]"])
    assert [v[deep], v[mixed], v[unbalanced], v[deep + "]"]] == \
        ["accept", "accept", "prefix", "reject"]
    assert lark_accepts(parser, deep) and lark_accepts(parser, mixed)
    assert not lark_accepts(parser, unbalanced)


REGEXES = [
    (r"(ab|a)*c?", "abc"),
    (r"[0-9]{1,3}(\.[0-9]+)?", "1.a"),
    (r"^\d+-\w*$", "1-a_"),
    (r"(yes|no|maybe)\n", "yesnom\n"),
    (r"[^a]b.", "ab\n"),
]


@pytest.mark.parametrize("pattern,alphabet", REGEXES)
def test_regex_agrees_with_python_fullmatch(pattern, alphabet):
    inputs = strings(list(alphabet), 6)
    verdicts = kiln_verdicts(["--regex", pattern], inputs)
    compiled = re.compile(pattern)
    disagree = [s for s in inputs
                if (verdicts[s] == "accept") != (compiled.fullmatch(s) is not None)]
    assert not disagree, [(s, verdicts[s]) for s in disagree[:10]]
    check_rejections_are_final(verdicts)


@pytest.mark.parametrize("text,needle", [
    ("root ::= item\nitem ::= missing", "undefined rule 'missing'"),
    ("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", "rule 'expr' is left-recursive"),
    ("root ::= \"x\" loop\nloop ::= \"y\" loop", "rule 'loop' can never finish"),
    ("root ::= [a-z", "line 1, column 10"),
])
def test_refusals_name_the_rule(tmp_path, text, needle):
    path = tmp_path / "g.gbnf"
    path.write_text(text)
    run = subprocess.run([kiln_bin(), "grammar-check", "--grammar", str(path)], input="",
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert needle in run.stdout, run.stdout
