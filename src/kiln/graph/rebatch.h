// Re-specializing a graph to another batch size without tracing and optimizing it again.
//
// The plans of a GraphRunner differ only in their batch size B (decode: T = S = B), and the
// pass pipeline makes the same decisions for every B. So capture traces and optimizes ONE
// template per output kind at kTemplateBatch and rebatches it for every captured size,
// instead of running the pipeline once per plan (docs/architecture.md,
// Terms: "memory reuse" across plans: one optimized structure, many shapes).
//
// The template batch is a prime that no model dimension is a multiple of, so a dimension
// carries the batch exactly when it is a multiple of it: k * kTemplateBatch becomes k * B in
// value types, reshape targets and the graph's named dims. Every other type is re-inferred
// from the rewritten inputs and must agree with that rule. What it does NOT do: guess at
// batch-dependent values it cannot see. A graph with any other attribute that is a multiple of
// the template batch is refused, and callers check that rebatching the template's trace
// reproduces the trace at B (see GraphRunner::capture), falling back to the full pipeline.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/graph/ir.h"

namespace kiln::graph {

inline constexpr int64_t kTemplateBatch = 65521;  // the largest prime below 2^16

// `g` (traced, optionally optimized, at batch size `from`) for batch size `to` >= 1.
// nullopt, with the reason in `why`, when the rule above cannot rewrite it.
std::optional<Graph> rebatch(const Graph& g, int64_t from, int64_t to, std::string* why = nullptr);

}  // namespace kiln::graph
