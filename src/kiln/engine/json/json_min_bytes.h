// The fewest bytes any value a compiled schema allows can take: a lower bound, for refusing a
// request before it generates when its token budget cannot hold such a value (a minLength of
// 10^9, a minItems of arrays of long strings). A constrained decoder would otherwise generate
// until max_tokens and return a value that the schema refuses.
#pragma once
#include <cstdint>

#include "kiln/engine/json/json_schema.h"

namespace kiln::engine {

// A lower bound on the length in bytes of the shortest value `schema`'s root allows (saturates
// at UINT64_MAX / 4: recursion that never bottoms out).
uint64_t json_min_bytes(const JsonSchema& schema);

}  // namespace kiln::engine
