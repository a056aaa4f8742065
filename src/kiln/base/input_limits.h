// Bounds on the structure of untrusted input: request bodies, JSON values inside them (tool
// arguments, schemas), regular expressions in schemas. Everything that walks such structure
// recursively (JSON writers, schema compilers, the regex parser) may rely on these: a value
// nested deeper is refused when it is parsed, so no walk can exhaust the stack, and no
// compilation runs longer than its budget (docs/http-server.md, "Limits").
#pragma once
#include <cstdint>

namespace kiln {

// Objects and arrays inside one another (a JSON text) or groups inside one another (a regular
// expression): at most this many levels. Real schemas and tool arguments nest a few levels;
// a request body adds about five of its own (messages, tools, function, parameters, ...).
inline constexpr int kMaxInputNesting = 128;

// Elementary steps (automaton states and edges visited, regex nodes built) that compiling the
// string constraints of one schema (all its patterns, formats and length limits together:
// engine/json/constraint_budget.h) may take, summed over parsing, NFA building,
// determinization, intersection and trimming. Measured with bench/constraint_compile_bench.cc
// on a 2-core EPYC under load: a step costs 1-13 ns, so the worst inputs found are refused
// after ~1.3 s of one core at most (3,000 unanchored alternatives), holding at most ~650 MB (a
// step stores a few words at most; a maxLength of 65,000 beside a class of 3,000 separate
// characters). A constraint over budget is refused, not truncated.
inline constexpr uint64_t kMaxConstraintCompileWork = 100'000'000;

}  // namespace kiln
