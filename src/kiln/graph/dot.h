// Graphviz DOT for `kiln graph --dot`: one box per node labelled with its op (and a source's
// name, and key attributes) and its output types; one edge per value use, dashed for effect
// tokens, labelled with the output index for multi-output nodes. Sources are ellipses.
#pragma once
#include <string>

#include "kiln/graph/ir.h"

namespace kiln::graph {

std::string to_dot(const Graph& graph);

}  // namespace kiln::graph
