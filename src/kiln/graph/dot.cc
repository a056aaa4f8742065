#include "kiln/graph/dot.h"

#include <fmt/format.h>

#include "kiln/graph/printer.h"

namespace kiln::graph {
namespace {

// Escapes for a double-quoted DOT string; "\n" in labels is DOT's own line break.
std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}

}  // namespace

std::string to_dot(const Graph& g) {
  std::string out =
      fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n",
                  escape(g.name()));
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    std::string label = fmt::format("%{} {}", i, op_name(n.op));
    if (n.is_source()) {
      if (const AttrValue* name = n.attrs.find("name")) {
        label.append(" ").append(attr_to_string(*name));
      }
    } else {
      const std::string attrs = attrs_to_string(n.attrs);
      if (!attrs.empty()) label += "\n" + attrs;
    }
    std::string types;
    for (const ValueType& t : n.outputs) types += (types.empty() ? "" : ", ") + type_to_string(t);
    label += "\n" + types;
    out += fmt::format("  n{} [label=\"{}\"{}];\n", i, escape(label),
                       n.is_source() ? ", shape=ellipse" : "");
  }
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    for (const Value& in : n.inputs) {
      std::string style;
      if (g.node(in.node).outputs.size() > 1) style += fmt::format("label=\"{}\"", in.index);
      if (g.type(in).dtype == DType::Token)
        style += std::string(style.empty() ? "" : ", ") + "style=dashed";
      out += fmt::format("  n{} -> n{}{};\n", in.node, i, style.empty() ? "" : " [" + style + "]");
    }
  }
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    out += fmt::format("  out{} [label=\"return {}\", shape=plaintext];\n  n{} -> out{};\n", k, k,
                       g.outputs()[k].node, k);
  }
  return out + "}\n";
}

}  // namespace kiln::graph
