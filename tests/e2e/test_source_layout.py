"""The source tree's dependencies run one way: no two files include each other (a header and
its .cc count as one unit), apart from the implementation splits listed below, and the server
reaches the engine through its configuration types, not through the Engine class."""
import re

from kiln_server import REPO

SRC = REPO / "src" / "kiln"
INCLUDE = re.compile(r'#include "kiln/(.+)\.h"')
# A public header and the private header of its own implementation (an ISA table, the
# lowering's internals, a tokenizer model's factory): one unit split in files.
ALLOWED_PAIRS = {
    ("kernels/attention", "kernels/attention_isa"),
    ("graph/lowering", "graph/lowering_internal"),
    ("model/tokenizer", "model/tokenizer_bpe"),
    ("model/tokenizer", "model/tokenizer_spm"),
}


def includes():
    out = {}
    for path in list(SRC.rglob("*.h")) + list(SRC.rglob("*.cc")):
        unit = str(path.relative_to(SRC).with_suffix(""))
        for m in INCLUDE.finditer(path.read_text(encoding="utf-8")):
            if m.group(1) != unit:
                out.setdefault(unit, set()).add(m.group(1))
    return out


def mutual_pairs(graph):
    return {tuple(sorted((a, b))) for a, bs in graph.items() for b in bs if a in graph.get(b, ())}


def test_no_two_files_include_each_other():
    graph = includes()
    assert len(graph) > 100  # the tree was read
    assert mutual_pairs(graph) - ALLOWED_PAIRS == set()


def test_the_check_finds_a_pair():
    assert mutual_pairs({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == {("a", "b")}


def test_the_server_does_not_need_the_engine_class():
    graph = includes()
    assert "engine/engine" not in graph["server/backend"]
    assert "engine/engine" not in graph["engine/scheduler"]
