#include "kiln/graph/ir.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

#include "kiln/base/error.h"

namespace kiln::graph {
namespace {

const char* attr_kind(const AttrValue& v) {
  switch (v.index()) {
    case 0:
      return "int";
    case 1:
      return "float";
    case 2:
      return "string";
    case 3:
      return "int list";
    default:
      return "string list";
  }
}

template <typename T>
const T& get_typed(const Attrs& attrs, std::string_view key, const char* wanted) {
  const AttrValue* v = attrs.find(key);
  KILN_CHECK(v != nullptr, "missing attribute '{}'", key);
  const T* typed = std::get_if<T>(v);
  KILN_CHECK(typed != nullptr, "attribute '{}' is a {}, expected a {}", key, attr_kind(*v), wanted);
  return *typed;
}

}  // namespace

// ---- Attrs ----

const AttrValue* Attrs::find(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k == key) return &v;
  }
  return nullptr;
}

int64_t Attrs::get_int(std::string_view key) const { return get_typed<int64_t>(*this, key, "int"); }

int64_t Attrs::get_int(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double Attrs::get_float(std::string_view key) const {
  const AttrValue* v = find(key);
  KILN_CHECK(v != nullptr, "missing attribute '{}'", key);
  if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return get_typed<double>(*this, key, "float");
}

double Attrs::get_float(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

const std::string& Attrs::get_str(std::string_view key) const {
  return get_typed<std::string>(*this, key, "string");
}

const std::vector<int64_t>& Attrs::get_ints(std::string_view key) const {
  return get_typed<std::vector<int64_t>>(*this, key, "int list");
}

const std::vector<std::string>& Attrs::get_strs(std::string_view key) const {
  return get_typed<std::vector<std::string>>(*this, key, "string list");
}

void Attrs::set(std::string key, AttrValue value) {
  for (auto& [k, v] : items_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

void Attrs::erase(std::string_view key) {
  std::erase_if(items_, [&](const auto& kv) { return kv.first == key; });
}

// ---- Graph ----

int64_t& graph_nodes_walked() {
  thread_local int64_t walked = 0;
  return walked;
}

Value Graph::add_node(Node node) {
  const int self = num_nodes();
  for (const Value& in : node.inputs) {
    KILN_CHECK(in.node >= 0 && in.node < self, "{} node {}: input %{} does not exist yet",
               op_name(node.op), self, in.node);
    KILN_CHECK(in.index >= 0 && in.index < static_cast<int>(nodes_[in.node].outputs.size()),
               "{} node {}: input node {} has no output {}", op_name(node.op), self, in.node,
               in.index);
  }
  if (node.outputs.empty()) {
    KILN_CHECK(!node.is_source(), "{} node {} needs a declared type", op_name(node.op), self);
    std::vector<ValueType> in_types;
    for (const Value& in : node.inputs) in_types.push_back(type(in));
    node.outputs = infer_output_types(node.op, in_types, node.attrs);
  }
  nodes_.push_back(std::move(node));
  return Value{self, 0};
}

std::optional<Value> Graph::find_source(Op kind, std::string_view name) const {
  for (int i = 0; i < num_nodes(); ++i) {
    const Node& n = nodes_[i];
    if (n.op != kind) continue;
    const AttrValue* v = n.attrs.find("name");
    if (v && std::holds_alternative<std::string>(*v) && std::get<std::string>(*v) == name) {
      return Value{i, 0};
    }
  }
  return std::nullopt;
}

void Graph::replace_all_uses(Value from, Value to) {
  graph_nodes_walked() += num_nodes();
  for (Node& n : nodes_) {
    for (Value& in : n.inputs) {
      if (in == from) in = to;
    }
  }
  for (Value& out : outputs_) {
    if (out == from) out = to;
  }
}

std::vector<std::vector<int>> Graph::use_counts() const {
  graph_nodes_walked() += num_nodes();
  std::vector<std::vector<int>> uses(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) uses[i].assign(nodes_[i].outputs.size(), 0);
  auto count = [&](const Value& v) {
    if (v.node >= 0 && v.node < num_nodes() && v.index >= 0 &&
        v.index < static_cast<int>(uses[v.node].size())) {
      ++uses[v.node][v.index];
    }
  };
  for (const Node& n : nodes_) {
    for (const Value& in : n.inputs) count(in);
  }
  for (const Value& out : outputs_) count(out);
  return uses;
}

int Graph::remove_nodes(const std::vector<bool>& dead) {
  KILN_CHECK(dead.size() == nodes_.size(), "remove_nodes: {} flags for {} nodes", dead.size(),
             nodes_.size());
  graph_nodes_walked() += num_nodes();
  std::vector<int32_t> new_index(nodes_.size(), -1);
  int32_t next = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!dead[i]) new_index[i] = next++;
  }
  auto remap = [&](Value& v, std::string_view user) {
    KILN_CHECK(new_index[v.node] >= 0, "remove_nodes: node {} is still used by {}", v.node, user);
    v.node = new_index[v.node];
  };
  std::vector<Node> kept;
  kept.reserve(next);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (dead[i]) continue;
    for (Value& in : nodes_[i].inputs) remap(in, fmt::format("node {}", i));
    kept.push_back(std::move(nodes_[i]));
  }
  for (Value& out : outputs_) remap(out, "a graph output");
  const int removed = num_nodes() - next;
  nodes_ = std::move(kept);
  return removed;
}

void Graph::keep_in_order(const std::vector<int>& order) {
  graph_nodes_walked() += num_nodes();
  std::vector<int32_t> new_index(nodes_.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) {
    const int i = order[k];
    KILN_CHECK(i >= 0 && i < num_nodes() && new_index[i] < 0,
               "keep_in_order: node {} is missing or listed twice", i);
    new_index[i] = static_cast<int32_t>(k);
  }
  auto remap = [&](Value& v, int user) {  // user -1: a graph output
    KILN_CHECK(new_index[v.node] >= 0, "keep_in_order: node {} is dropped but used by {}", v.node,
               user < 0 ? std::string("a graph output") : fmt::format("node {}", user));
    v.node = new_index[v.node];
  };
  std::vector<Node> kept;
  kept.reserve(order.size());
  for (int i : order) {
    for (Value& in : nodes_[i].inputs) remap(in, i);
    kept.push_back(std::move(nodes_[i]));
  }
  for (Value& out : outputs_) remap(out, -1);
  nodes_ = std::move(kept);
}

Value Graph::insert_node(int pos, Node node) {
  KILN_CHECK(pos >= 0 && pos <= num_nodes(), "insert_node: position {} outside [0, {}]", pos,
             num_nodes());
  KILN_CHECK(!node.outputs.empty(), "insert_node: {} needs its output types", op_name(node.op));
  graph_nodes_walked() += num_nodes();
  auto shift = [&](Value& v) {
    if (v.node >= pos) ++v.node;
  };
  for (Node& n : nodes_) {
    for (Value& in : n.inputs) shift(in);
  }
  for (Value& out : outputs_) shift(out);
  for (Value& in : node.inputs) {
    KILN_CHECK(in.node >= 0 && in.node < num_nodes(), "insert_node: input node {} does not exist",
               in.node);
    shift(in);
  }
  nodes_.insert(nodes_.begin() + pos, std::move(node));
  return Value{pos, 0};
}

void Graph::sort_topologically() {
  const int n = num_nodes();
  graph_nodes_walked() += n;
  // Edges: producer -> consumer for data, and reader-of-token -> mutator-consuming-that-token
  // (the mutation overwrites state the reader must see unchanged).
  std::vector<std::vector<int>> succ(n);
  std::vector<int> preds(n, 0);
  auto edge = [&](int from, int to) {
    KILN_CHECK(from >= 0 && from < n, "sort_topologically: node {} reads missing node {}", to,
               from);
    succ[from].push_back(to);
    ++preds[to];
  };
  // For each value, the mutating op that consumes it (at most one in a valid graph).
  std::vector<std::vector<int>> mutator(n);
  for (int i = 0; i < n; ++i) mutator[i].assign(nodes_[i].outputs.size(), -1);
  for (int i = 0; i < n; ++i) {
    const Node& node = nodes_[i];
    for (const Value& in : node.inputs) edge(in.node, i);
    if (has_side_effect(node.op)) {
      for (const Value& in : node.inputs) {
        if (in.node >= 0 && in.node < n && in.index < static_cast<int>(mutator[in.node].size()) &&
            (type(in).dtype == DType::Token || nodes_[in.node].op == Op::State)) {
          mutator[in.node][in.index] = i;
        }
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    if (has_side_effect(nodes_[i].op)) continue;
    for (const Value& in : nodes_[i].inputs) {
      const int m = mutator[in.node][in.index];
      if (m >= 0 && m != i) edge(i, m);
    }
  }
  // Kahn's algorithm, always taking the ready node that comes first in the current order.
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i) {
    if (preds[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int s : succ[i]) {
      if (--preds[s] == 0) ready.push(s);
    }
  }
  KILN_CHECK(static_cast<int>(order.size()) == n,
             "graph {} has a cycle (data or effect-token order); {} of {} nodes sortable", name_,
             order.size(), n);
  std::vector<int32_t> new_index(n);
  for (int k = 0; k < n; ++k) new_index[order[k]] = k;
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int k = 0; k < n; ++k) {
    Node node = std::move(nodes_[order[k]]);
    for (Value& in : node.inputs) in.node = new_index[in.node];
    sorted.push_back(std::move(node));
  }
  for (Value& out : outputs_) out.node = new_index[out.node];
  nodes_ = std::move(sorted);
}

std::string_view Graph::value_name(Value v) const {
  const Node& n = nodes_[v.node];
  if (v.index < static_cast<int>(n.names.size())) return n.names[v.index];
  return {};
}

void Graph::set_value_name(Value v, std::string name) {
  Node& n = nodes_[v.node];
  if (static_cast<int>(n.names.size()) <= v.index) n.names.resize(v.index + 1);
  n.names[v.index] = std::move(name);
}

bool structurally_equal(const Graph& a, const Graph& b, std::string* why) {
  auto differ = [&](std::string message) {
    if (why) *why = std::move(message);
    return false;
  };
  if (a.name() != b.name()) return differ(fmt::format("name {} vs {}", a.name(), b.name()));
  if (a.dims() != b.dims()) return differ("dims differ");
  if (a.num_nodes() != b.num_nodes()) {
    return differ(fmt::format("{} vs {} nodes", a.num_nodes(), b.num_nodes()));
  }
  for (int i = 0; i < a.num_nodes(); ++i) {
    const Node& x = a.node(i);
    const Node& y = b.node(i);
    if (x.op != y.op) {
      return differ(fmt::format("node {}: {} vs {}", i, op_name(x.op), op_name(y.op)));
    }
    if (x.inputs != y.inputs) return differ(fmt::format("node {}: inputs differ", i));
    if (!(x.attrs == y.attrs)) return differ(fmt::format("node {}: attributes differ", i));
    if (x.outputs != y.outputs) return differ(fmt::format("node {}: output types differ", i));
  }
  if (a.outputs() != b.outputs()) return differ("graph outputs differ");
  return true;
}

}  // namespace kiln::graph
