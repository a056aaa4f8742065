// The text form of a graph, readable by parser.h. Printing is deterministic: parse(print(g))
// equals g structurally and print(parse(print(g))) == print(g).
//
//   graph decode(B=2) {
//     %ids = input "input_ids" : i32[2]
//     %token_embd = param "token_embd" : q8_0[262144,640]
//     %0 = embedding(%token_embd, %ids) : f32[2,640]
//     %1 = scale(%0) {factor=25.298} : f32[2,640]
//     %2, %3 = add_rms_norm(%1, %1, %w) {eps=1e-06} : f32[2,640], f32[2,640]
//     return %3
//   }
//
// Values print with their name when they have one, else with a number in order of definition.
#pragma once
#include <string>

#include "kiln/graph/ir.h"

namespace kiln::graph {

std::string print(const Graph& graph);

// Pieces of the text form, shared with error messages and other writers (DOT).
std::string type_to_string(const ValueType& type);   // f32[2,640], token[]
std::string attr_to_string(const AttrValue& value);  // 3, 1e-06, "x", [1,2], ["a","b"]
std::string attrs_to_string(const Attrs& attrs, bool skip_name = false);  // {k=v, ...} or ""
// Shortest text that reads back as the same double, always with a '.', 'e', inf or nan so
// that it does not read back as an int.
std::string format_float(double v);
std::string quote_string(const std::string& s);

}  // namespace kiln::graph
