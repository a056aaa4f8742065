"""The source tree's dependencies run one way: every folder under src/kiln is a layer that
includes only layers below it (docs/architecture.md, "Layers"), no files include each other in
a cycle of any length (a header and its .cc count as one unit, and so do the implementation
splits listed below), and the server reaches the engine through its configuration types, not
through the Engine class and its plain-data configuration."""
import re
import shutil

from kiln_server import REPO

SRC = REPO / "src" / "kiln"
INCLUDE = re.compile(r'#include "kiln/(.+)\.h"')
# Lowest first: a layer may include its own files and those of the layers before it.
LAYER_ORDER = ["base", "kernels", "graph", "model", "engine", "server"]
# Not layers: folders built only with an optional dependency, and what they may include.
SIDE_FOLDERS = {"mpi": {"base", "mpi"}}
# A public header and the private header of its own implementation (an ISA table, the
# lowering's internals, a tokenizer model's factory, one family's part of the config reader):
# one unit split in files.
SAME_UNIT = [
    ("kernels/attention", "kernels/attention_isa"),
    ("kernels/attention", "kernels/attention_simd"),
    ("graph/lowering", "graph/lowering_internal"),
    ("engine/json/json_matcher", "engine/json/json_matcher_grammar"),
    ("model/tokenizer", "model/tokenizer_bpe"),
    ("model/tokenizer", "model/tokenizer_spm"),
    ("model/tokenizer", "model/tokenizer_wpm"),
    ("model/model_config", "model/deepseek_config"),
]


def includes(root=SRC):
    out = {}
    for path in list(root.rglob("*.h")) + list(root.rglob("*.cc")):
        unit = str(path.relative_to(root).with_suffix(""))
        out.setdefault(unit, set())
        for m in INCLUDE.finditer(path.read_text(encoding="utf-8")):
            if m.group(1) != unit:
                out[unit].add(m.group(1))
    return out


def layer_of(unit):
    return unit.split("/", 1)[0]


def upward_includes(graph):
    """Each include of a layer above the includer's (or outside a side folder's allowance)."""
    bad = set()
    for a, bs in graph.items():
        la = layer_of(a)
        for b in bs:
            lb = layer_of(b)
            if la in SIDE_FOLDERS:
                ok = lb in SIDE_FOLDERS[la]
            else:
                ok = lb in LAYER_ORDER and LAYER_ORDER.index(lb) <= LAYER_ORDER.index(la)
            if not ok:
                bad.add((a, b))
    return bad


def cycles(graph, same_unit=()):
    """The strongly connected sets of more than one unit (after merging `same_unit` pairs)."""
    merged = {}
    for a, b in same_unit:
        merged[b] = merged.get(a, a)

    def unit(x):
        return merged.get(x, x)

    edges = {}
    for a, bs in graph.items():
        edges.setdefault(unit(a), set()).update(unit(b) for b in bs if unit(b) != unit(a))
    # Tarjan's algorithm, iterative (the include graph is a few hundred units deep at most).
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            child = next(it, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    component.add(x)
                    if x == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_layers_include_only_layers_below():
    graph = includes()
    assert len(graph) > 100  # the tree was read
    assert {layer_of(u) for u in graph} <= set(LAYER_ORDER) | set(SIDE_FOLDERS)
    assert upward_includes(graph) == set()


def test_no_include_cycles():
    assert cycles(includes(), SAME_UNIT) == []


def test_the_checks_find_what_they_look_for():
    assert upward_includes({"model/a": {"graph/b", "server/c"}, "mpi/m": {"engine/e"}}) == {
        ("model/a", "server/c"),
        ("mpi/m", "engine/e"),
    }
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": {"a"}}, [("a", "b")]) == []


def test_a_planted_upward_include_fails(tmp_path):
    tree = tmp_path / "kiln"
    shutil.copytree(SRC, tree)
    header = tree / "base" / "dtype.h"
    header.write_text(header.read_text(encoding="utf-8") + '#include "kiln/engine/runtime.h"\n')
    graph = includes(tree)
    assert upward_includes(graph) == {("base/dtype", "engine/runtime")}
    # The engine reaches dtype.h again through everything below it: the plant is a cycle too.
    assert any("base/dtype" in c for c in cycles(graph, SAME_UNIT))


def test_the_server_does_not_need_the_engine_class():
    graph = includes()
    assert "engine/engine" not in graph["server/backend"]
    assert "engine/engine" not in graph["engine/scheduler"]
    # The configuration the server includes is plain data: live objects (a draft model's
    # executor and pool, test hooks) travel beside it in speculative_resources.h.
    assert "engine/speculative_resources" not in graph["engine/engine_config"]
    server = [u for u in graph if u.startswith("server/")]
    assert not any("engine/speculative_resources" in graph[u] for u in server)
