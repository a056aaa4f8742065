// The graph IR: SSA values produced by nodes, kept in topological order.
//
// A Graph owns its Nodes. Each node has an op (op_table.h), input values, attributes and one
// or more typed outputs; a Value names output `index` of node `node`. Sources (input, param,
// state) are nodes with no inputs and a {name} attribute. Mutating ops (kv_write) consume and
// produce an effect token so no pass can reorder, merge or delete them.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/base/shape.h"
#include "kiln/graph/op_table.h"

namespace kiln::graph {

struct Value {
  int32_t node = -1;
  int32_t index = 0;
  bool valid() const { return node >= 0; }
  bool operator==(const Value& o) const { return node == o.node && index == o.index; }
  bool operator!=(const Value& o) const { return !(*this == o); }
};

struct ValueType {
  DType dtype = DType::F32;
  Shape shape;
  bool operator==(const ValueType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const ValueType& o) const { return !(*this == o); }
};

using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<std::string>>;

// Attributes in insertion order (printing is deterministic and readable).
class Attrs {
 public:
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const AttrValue* find(std::string_view key) const;
  int64_t get_int(std::string_view key) const;  // throws Error when missing or mistyped
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;  // accepts an int attribute too
  double get_float(std::string_view key, double fallback) const;
  const std::string& get_str(std::string_view key) const;
  const std::vector<int64_t>& get_ints(std::string_view key) const;
  const std::vector<std::string>& get_strs(std::string_view key) const;
  void set(std::string key, AttrValue value);
  void erase(std::string_view key);
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& o) const { return items_ == o.items_; }

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

// Graph input kinds (docs/architecture.md, Terms: "graph input copy optimization").
enum class SourceKind { Input, Param, State };

struct Node {
  Op op = Op::Input;
  std::vector<Value> inputs;
  std::vector<ValueType> outputs;
  Attrs attrs;
  // Optional display names of the outputs for the text form (%emb_w); empty or missing: the
  // printer numbers the value (%12). Names carry no meaning and are ignored by comparisons.
  std::vector<std::string> names;
  bool is_source() const { return op == Op::Input || op == Op::Param || op == Op::State; }
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  // Named dimensions bound in this graph, printed in the header: graph decode(B=2).
  std::vector<std::pair<std::string, int64_t>>& dims() { return dims_; }
  const std::vector<std::pair<std::string, int64_t>>& dims() const { return dims_; }

  // Appends a node (inputs must already exist) and returns its first output.
  Value add_node(Node node);
  const Node& node(int i) const { return nodes_[i]; }
  Node& node(int i) { return nodes_[i]; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const ValueType& type(Value v) const { return nodes_[v.node].outputs[v.index]; }

  const std::vector<Value>& outputs() const { return outputs_; }
  std::vector<Value>& outputs() { return outputs_; }

  // Source node with {name=...} of the given kind, if any.
  std::optional<Value> find_source(Op kind, std::string_view name) const;

  // Every use of `from` (node inputs and graph outputs) now reads `to`.
  void replace_all_uses(Value from, Value to);
  // How many node inputs and graph outputs read each output of each node: uses[node][index].
  std::vector<std::vector<int>> use_counts() const;
  // Removes the nodes marked in `dead` (nothing may use them) and renumbers the rest,
  // keeping order. Returns the number removed.
  int remove_nodes(const std::vector<bool>& dead);
  // Keeps only the nodes listed, in that order (each at most once, every used node listed),
  // and renumbers inputs and graph outputs to match: the one renumbering at the end of a pass
  // that rewrote nodes under stable ids (passes/rewrite.h).
  void keep_in_order(const std::vector<int>& order);
  // Inserts `node` before position `pos`, renumbering later nodes; returns its first output.
  // The new node's inputs name nodes in the numbering before the insertion.
  Value insert_node(int pos, Node node);
  // Reorders the nodes so that every value is defined before its uses and every reader of an
  // effect token runs before the mutating op that consumes that token, keeping the current
  // order wherever it already satisfies this. Passes call it after a rewrite that placed a
  // node too early or too late. Throws Error on a cycle.
  void sort_topologically();
  // Name of the output for the text form ("" when it has none).
  std::string_view value_name(Value v) const;
  void set_value_name(Value v, std::string name);

 private:
  std::string name_;
  std::vector<std::pair<std::string, int64_t>> dims_;
  std::vector<Node> nodes_;
  std::vector<Value> outputs_;
};

// Nodes visited by whole-graph walks (the Graph methods above that touch every node, UseMap
// construction) and by pass rewrites (passes/rewrite.h), on this thread. Only tests read it:
// a pass whose count grows faster than the graph does quadratic work.
int64_t& graph_nodes_walked();

// Output types of `op` with these input types and attributes; throws Error naming the node's
// problem (arity, dtype, shape mismatch). Shared by Builder, parser and verifier.
std::vector<ValueType> infer_output_types(Op op, const std::vector<ValueType>& inputs,
                                          const Attrs& attrs);

// True when both graphs have the same name, dims, nodes (op, inputs, attrs, types) and outputs.
// Value names are ignored. On a difference, `why` (if given) says where.
bool structurally_equal(const Graph& a, const Graph& b, std::string* why = nullptr);

// Checks SSA order, arity, types (re-inferred), effect-token use, and that outputs exist.
// Throws Error describing the first violation.
void verify(const Graph& graph);

}  // namespace kiln::graph
