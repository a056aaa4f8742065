// Running one graph step numerically in both execution modes, for tests that compare graphs
// (fused vs unfused, optimized vs traced): the eager Interpreter and a captured Plan
// (prepare + bind + replay). Each run starts from its own copy of the initial KV pool, so runs
// can be compared by their outputs AND the pool bytes they leave behind.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/base/thread_pool.h"
#include "kiln/graph/builder.h"
#include "kiln/graph/interpreter.h"
#include "kiln/graph/plan.h"

namespace kiln::graph::testing {

// One step's inputs: graph inputs by name, and the paged KV pool (the graph's state input,
// f16[2*layers, pages, page_size, kv_heads*head_dim]) when the graph has one.
struct StepData {
  std::vector<Binding> inputs;
  std::string state_name = "kv_pool";
  Tensor kv_pool;  // initial contents; empty: the graph has no state
  KvGeometry kv;
};

struct RunResult {
  std::vector<Tensor> outputs;
  Tensor kv_pool;  // contents after the step (empty without state)
};

RunResult run_interpreted(const Graph& g, const StepData& data, WeightProvider& weights,
                          ThreadPool& pool);

// Captures `g` as a Plan and replays it `replays` times (each replay of the same step must
// leave the same outputs; KV writes of the same rows to the same slots are idempotent).
RunResult run_planned(const Graph& g, const StepData& data, WeightProvider& weights,
                      ThreadPool& pool, const PlanOptions& options = {}, int replays = 2);

// Outputs (dtype, shape, every byte) and KV pool bytes are identical; on a difference, says
// which output and the first differing element.
::testing::AssertionResult same_bits(const RunResult& want, const RunResult& got);

// A step of T rows over paged KV: sequences with history already in the pool (random f16
// keys and values from `seed`), a block table that maps their pages in reverse order, rows of
// one sequence consecutive with increasing positions that cross page boundaries, and (when
// `inert_last_row`) a padded last row (token_seq -1, slot -1). Binds input names positions,
// token_seq, out_cache_slots, block_table, seq_lens.
StepData paged_step(int64_t T, const KvGeometry& kv, uint64_t seed, bool inert_last_row);

// Declares every binding of `data` as a graph input of the same name, dtype and shape.
std::map<std::string, Value> declare_inputs(Builder& b, const StepData& data);

// A random f32 tensor (normal values) from `seed`, bound as graph input `name`.
Binding random_input(const std::string& name, const Shape& shape, uint64_t seed);

}  // namespace kiln::graph::testing
