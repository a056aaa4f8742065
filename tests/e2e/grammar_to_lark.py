"""GBNF (llama.cpp's grammar format, which SGLang's ebnf shares) translated to Lark's grammar
syntax, so that Lark, a parser kiln did not write, can judge what kiln's grammar engine accepts.

Every terminal becomes a Lark regex over code points (`\\uXXXX` escapes), so Lark's Earley parser
with the dynamic lexer reads the input character by character as kiln's automaton does.
"""
import re

_TOKEN = re.compile(r'''
    (?P<space>\s+|\#[^\n]*)
  | (?P<define>::=)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
  | (?P<klass>\[(?:\\.|[^\]\\])*\])
  | (?P<name>[A-Za-z0-9_-]+)
  | (?P<bounds>\{\s*\d*\s*(?:,\s*\d*\s*)?\})
  | (?P<punct>[()|*+?.])
''', re.VERBOSE)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "b": "\b", "0": "\0"}


def _chars(body):
    """The code points of a literal or class body, escapes decoded; (code point, escaped)."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append((ord(c), False))
            i += 1
            continue
        e = body[i + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width:
            out.append((int(body[i + 2:i + 2 + width], 16), True))
            i += 2 + width
        else:
            out.append((ord(_ESCAPES.get(e, e)), True))
            i += 2
    return out


def _cp(c):
    # ASCII letters and digits as themselves, other printable ASCII escaped with a backslash
    # (Lark turns \\u escapes into raw characters before the regex sees them), the rest as
    # \\u escapes (a raw control or non-ASCII character means itself to `re`).
    if c < 0x80 and chr(c).isalnum():
        return chr(c)
    if 0x20 <= c < 0x7F:
        return "\\" + chr(c)
    return "\\u%04x" % c if c <= 0xFFFF else "\\U%08x" % c


def _literal(cps):
    return "/" + "".join(_cp(c) for c, _ in cps) + "/"


def _klass(body):
    negate = body.startswith("^")
    cps = _chars(body[1:] if negate else body)
    parts, i = [], 0
    while i < len(cps):
        lo = cps[i][0]
        if i + 2 < len(cps) and cps[i + 1] == (ord("-"), False):
            parts.append(_cp(lo) + "-" + _cp(cps[i + 2][0]))
            i += 3
        else:
            parts.append(_cp(lo))
            i += 1
    return "/[" + ("^" if negate else "") + "".join(parts) + "]/"


def _rule_name(name):
    return "r_" + name.replace("-", "_").lower()


def translate(text):
    """The Lark grammar for GBNF `text`, its start rule named r_root."""
    tokens = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind != "space":
            tokens.append((kind, m.group()))
    assert sum(len(m.group()) for m in _TOKEN.finditer(text)) == len(text), "untokenizable"
    rules, i = [], 0

    def peek(k=0):
        return tokens[i + k] if i + k < len(tokens) else (None, None)

    def alternatives():
        nonlocal i
        alts = [sequence()]
        while peek() == ("punct", "|"):
            i += 1
            alts.append(sequence())
        return " | ".join(alts)

    def sequence():
        nonlocal i
        items = []
        while True:
            kind, value = peek()
            if kind is None or value in ("|", ")"):
                break
            if kind == "name" and peek(1)[0] == "define":
                break
            items.append(item())
        assert items, "an empty alternative has no Lark spelling here"
        return " ".join(items)

    def item():
        nonlocal i
        kind, value = peek()
        i += 1
        if kind == "string":
            atom = _literal(_chars(value[1:-1]))
        elif kind == "klass":
            atom = _klass(value[1:-1])
        elif kind == "name":
            atom = _rule_name(value)
        elif value == ".":
            atom = "/(?s:.)/"
        elif value == "(":
            atom = "(" + alternatives() + ")"
            assert peek() == ("punct", ")")
            i += 1
        else:
            raise ValueError("unexpected " + value)
        while peek()[1] in ("*", "+", "?") or peek()[0] == "bounds":
            kind, value = peek()
            i += 1
            if kind != "bounds":
                atom = "(" + atom + ")" + value
                continue
            inner = value[1:-1].replace(" ", "")
            lo, _, hi = inner.partition(",")
            lo = int(lo or 0)
            if "," not in inner:
                hi = lo
            hi = None if hi == "" else int(hi)
            once = "(" + atom + ")"
            if hi is None:
                atom = "(" + (once + " ~ %d " % lo if lo else "") + once + "*)"
            elif lo == 0:
                atom = "[" + once + " ~ 1..%d]" % hi
            else:
                atom = "(" + once + (" ~ %d" % lo if lo == hi else " ~ %d..%d" % (lo, hi)) + ")"
        return atom

    while i < len(tokens):
        kind, name = peek()
        assert kind == "name" and peek(1)[0] == "define", (kind, name)
        i += 2
        rules.append(_rule_name(name) + ": " + alternatives())
    return "\n".join(rules) + "\n"
