#include "kiln/graph/rebatch.h"

#include <fmt/format.h>

#include "kiln/base/error.h"

namespace kiln::graph {
namespace {

struct Rule {
  int64_t from;
  int64_t to;
  // k * from => k * to; other dimensions are not the batch's.
  int64_t dim(int64_t d) const { return d != 0 && d % from == 0 ? d / from * to : d; }
  Shape shape(const Shape& s) const {
    Shape out = s;
    for (int i = 0; i < s.rank(); ++i) out[i] = dim(s[i]);
    return out;
  }
  bool carries_batch(int64_t v) const { return v != 0 && v % from == 0; }
};

std::string type_str(const ValueType& t) {
  return fmt::format("{}{}", dtype_name(t.dtype), t.shape.str());
}

}  // namespace

std::optional<Graph> rebatch(const Graph& g, int64_t from, int64_t to, std::string* why) {
  KILN_CHECK(from >= 2 && to >= 1, "rebatch from {} to {}: sizes must be >= 2 and >= 1", from, to);
  auto refuse = [&](std::string message) -> std::optional<Graph> {
    if (why) *why = std::move(message);
    return std::nullopt;
  };
  const Rule rule{from, to};
  Graph out = g;  // same nodes, inputs, attributes and names; only sizes change
  for (auto& [name, value] : out.dims()) value = rule.dim(value);
  for (int i = 0; i < out.num_nodes(); ++i) {
    Node& n = out.node(i);
    for (const auto& [key, value] : n.attrs.items()) {
      if (n.op == Op::Reshape && key == "shape") continue;
      bool batch_valued = false;
      if (const auto* v = std::get_if<int64_t>(&value)) batch_valued = rule.carries_batch(*v);
      if (const auto* vs = std::get_if<std::vector<int64_t>>(&value)) {
        for (int64_t v : *vs) batch_valued = batch_valued || rule.carries_batch(v);
      }
      if (batch_valued)
        return refuse(fmt::format("node {} ({}): attribute '{}' depends on the batch size", i,
                                  op_name(n.op), key));
    }
    if (n.op == Op::Reshape) {
      std::vector<int64_t> target = n.attrs.get_ints("shape");
      for (int64_t& d : target) d = rule.dim(d);
      n.attrs.set("shape", std::move(target));
    }
    if (n.is_source()) {
      for (ValueType& t : n.outputs) t.shape = rule.shape(t.shape);
      continue;
    }
    std::vector<ValueType> in_types;
    for (const Value& v : n.inputs) in_types.push_back(out.type(v));
    std::vector<ValueType> inferred;
    try {
      inferred = infer_output_types(n.op, in_types, n.attrs);
    } catch (const Error& e) {
      return refuse(fmt::format("node {} ({}): {}", i, op_name(n.op), e.what()));
    }
    if (inferred.size() != n.outputs.size())
      return refuse(fmt::format("node {} ({}): {} outputs inferred, {} declared", i, op_name(n.op),
                                inferred.size(), n.outputs.size()));
    for (size_t k = 0; k < inferred.size(); ++k) {
      const ValueType expected{n.outputs[k].dtype, rule.shape(n.outputs[k].shape)};
      if (inferred[k] != expected)
        return refuse(fmt::format("node {} ({}) output {}: inferred {}, the batch rule gives {}", i,
                                  op_name(n.op), k, type_str(inferred[k]), type_str(expected)));
      n.outputs[k] = inferred[k];
    }
  }
  return out;
}

}  // namespace kiln::graph
