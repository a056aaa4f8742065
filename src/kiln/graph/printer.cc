#include "kiln/graph/printer.h"

#include <fmt/format.h>

#include <set>
#include <unordered_set>

namespace kiln::graph {
namespace {

// A name the parser reads back as a name (not a number): [A-Za-z0-9_.]+ with a non-digit.
bool usable_name(std::string_view s) {
  bool has_non_digit = false;
  for (char ch : s) {
    const bool digit = ch >= '0' && ch <= '9';
    const bool ok =
        digit || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == '.';
    if (!ok) return false;
    has_non_digit |= !digit;
  }
  return has_non_digit;
}

}  // namespace

std::string format_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEna") == std::string::npos) s += ".0";
  return s;
}

std::string quote_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          out += fmt::format("\\x{:02x}", ch);
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

std::string type_to_string(const ValueType& type) {
  return fmt::format("{}{}", dtype_name(type.dtype), type.shape.str());
}

std::string attr_to_string(const AttrValue& value) {
  struct Visitor {
    std::string operator()(int64_t v) const { return fmt::format("{}", v); }
    std::string operator()(double v) const { return format_float(v); }
    std::string operator()(const std::string& v) const { return quote_string(v); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return fmt::format("[{}]", fmt::join(v, ","));
    }
    std::string operator()(const std::vector<std::string>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += ',';
        s += quote_string(v[i]);
      }
      return s + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

std::string attrs_to_string(const Attrs& attrs, bool skip_name) {
  std::string s;
  for (const auto& [key, value] : attrs.items()) {
    if (skip_name && key == "name") continue;
    s += fmt::format("{}{}={}", s.empty() ? "{" : ", ", key, attr_to_string(value));
  }
  return s.empty() ? s : s + "}";
}

std::string print(const Graph& g) {
  // Display names: a value's own name when usable and not taken, else a fresh number.
  std::vector<std::vector<std::string>> names(g.num_nodes());
  std::unordered_set<std::string> taken;
  int next_number = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    for (int k = 0; k < static_cast<int>(g.node(i).outputs.size()); ++k) {
      std::string name{g.value_name(Value{i, k})};
      if (usable_name(name)) {
        std::string candidate = name;
        for (int suffix = 1; taken.count(candidate); ++suffix)
          candidate = fmt::format("{}.{}", name, suffix);
        name = candidate;
      } else {
        name = fmt::format("{}", next_number++);
      }
      taken.insert(name);
      names[i].push_back("%" + name);
    }
  }
  auto ref = [&](Value v) -> std::string {
    if (v.node < 0 || v.node >= g.num_nodes() || v.index < 0 ||
        v.index >= static_cast<int>(names[v.node].size())) {
      return fmt::format("%<bad:{}:{}>", v.node, v.index);
    }
    return names[v.node][v.index];
  };

  std::string out = fmt::format("graph {}(", g.name());
  for (size_t i = 0; i < g.dims().size(); ++i) {
    out += fmt::format("{}{}={}", i ? ", " : "", g.dims()[i].first, g.dims()[i].second);
  }
  out += ") {\n";
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    out += "  " + fmt::format("{}", fmt::join(names[i], ", ")) + " = " + std::string(op_name(n.op));
    if (n.is_source()) {
      const AttrValue* name = n.attrs.find("name");
      out.append(" ").append(name ? attr_to_string(*name) : std::string("\"\""));
      const std::string rest = attrs_to_string(n.attrs, /*skip_name=*/true);
      if (!rest.empty()) out += " " + rest;
    } else {
      out += "(";
      for (size_t k = 0; k < n.inputs.size(); ++k) out += (k ? ", " : "") + ref(n.inputs[k]);
      out += ")";
      const std::string attrs = attrs_to_string(n.attrs);
      if (!attrs.empty()) out += " " + attrs;
    }
    out += " : ";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      out += (k ? ", " : "") + type_to_string(n.outputs[k]);
    out += "\n";
  }
  out += "  return";
  for (size_t k = 0; k < g.outputs().size(); ++k) out += (k ? ", " : " ") + ref(g.outputs()[k]);
  out += "\n}\n";
  return out;
}

}  // namespace kiln::graph
