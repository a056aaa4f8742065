// Reads the text form written by printer.h (see there for the syntax). Besides what the printer
// writes, the parser accepts `// comments`, any spacing, numbered values in any order of
// numbers, and `graph name {` without dims. The declared type of every non-source node must
// equal its inferred type. Errors are kiln::Error naming line and column.
#pragma once
#include <string_view>

#include "kiln/graph/ir.h"

namespace kiln::graph {

// Parses and verifies one graph.
Graph parse(std::string_view text);

}  // namespace kiln::graph
