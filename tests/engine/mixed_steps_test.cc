// Mixed steps on the tiny random-weight models: requests that are decoding while new prompts
// prefill get their tokens from eager steps that also carry prefill chunks; the same requests
// through graph mode with and without mixed steps (where every decode step replays a plan)
// give the same tokens, greedy and sampled, for every architecture and several batch sizes.
// The scheduler is driven directly, so the batches are the same in every run.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kiln/engine/runtime.h"
#include "kiln/engine/scheduler.h"
#include "kiln/engine/tokenizer_text.h"
#include "tiny_runtime.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

engine::GenerateRequest request(int prompt_len, uint64_t seed, int64_t vocab, bool sampled) {
  engine::GenerateRequest r;
  r.prompt_ids = random_ids(prompt_len, seed, vocab);
  r.sampling.temperature = sampled ? 0.8 : 0.0;
  r.sampling.seed = seed;
  r.stop.max_new_tokens = 24;
  r.stop.ignore_eos = true;
  return r;
}

struct RunResult {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  engine::EngineStats stats;
};

// `n` short requests start decoding, then `n` long prompts arrive and prefill in chunks of at
// most 24 tokens while the first ones decode.
RunResult run(engine::Runtime& rt, int n, bool mixed) {
  engine::EngineConfig ec;
  ec.mixed_steps = mixed;
  ec.chunked_prefill_size = 16;
  ec.max_prefill_tokens_while_decoding = 24;
  ec.enable_prefix_cache = false;
  engine::TokenizerText text(rt.tokenizer());
  engine::Scheduler sched(rt.executor(), rt.kv_pool(), text, ec);
  RunResult out;
  auto on_event = [&out](const engine::RequestEvent& e) {
    EXPECT_TRUE(e.error.empty()) << e.error;
    auto& t = out.tokens[e.request_id];
    t.insert(t.end(), e.new_tokens.begin(), e.new_tokens.end());
  };
  const int64_t vocab = rt.info().vocab_size;
  uint64_t id = 1;
  for (int i = 0; i < n; ++i, ++id) {
    sched.add(id, request(3 + i % 5, 100 + id, vocab, i % 2 == 1), on_event, id);
  }
  // One step prefills every short prompt; the next decodes them.
  EXPECT_TRUE(sched.step());
  for (int i = 0; i < n; ++i, ++id) {
    sched.add(id, request(40 + 7 * i % 50, 100 + id, vocab, i % 2 == 0), on_event, id);
  }
  for (int guard = 0; !sched.idle() && guard < 100000; ++guard) sched.step();
  EXPECT_TRUE(sched.idle());
  out.stats = sched.stats();
  EXPECT_EQ(out.stats.kv_pages_used, 0);
  return out;
}

class MixedSteps : public ::testing::TestWithParam<std::string> {};

TEST_P(MixedSteps, GraphAndEagerGiveTheSameTokensWithAndWithoutMixedSteps) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::Runtime eager(tiny_runtime_options(model, engine::GraphMode::Off, 1));
  engine::Runtime graph(tiny_runtime_options(model, engine::GraphMode::Optimize, 32));
  for (int n : {1, 3, 8, 32}) {
    SCOPED_TRACE("decoding requests " + std::to_string(n));
    RunResult eager_mixed = run(eager, n, true);
    RunResult graph_mixed = run(graph, n, true);
    RunResult graph_alternating = run(graph, n, false);
    ASSERT_EQ(eager_mixed.tokens.size(), static_cast<size_t>(2 * n));
    for (const auto& [id, toks] : eager_mixed.tokens) {
      EXPECT_EQ(toks.size(), 24u) << "request " << id;
    }
    EXPECT_EQ(graph_mixed.tokens, eager_mixed.tokens);
    EXPECT_EQ(graph_alternating.tokens, eager_mixed.tokens);
    // The runs really took the paths they are named for.
    EXPECT_GT(eager_mixed.stats.mixed_steps, 0);
    EXPECT_GT(graph_mixed.stats.mixed_steps, 0);
    EXPECT_GT(graph_mixed.stats.graph_steps, 0);
    EXPECT_EQ(graph_alternating.stats.mixed_steps, 0);
    EXPECT_GT(graph_alternating.stats.graph_steps, graph_mixed.stats.graph_steps);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, MixedSteps, ::testing::ValuesIn(kTinyModels),
                         model_param_name);

}  // namespace
}  // namespace kiln::testing
