// Prompt scoring on the tiny random-weight models, through the Engine in eager and in graph
// mode: every prompt token's logprob equals the log-softmax of a full forward's logits at that
// position (the prompt fed one token per step through the eager path, each row scored here in
// double), with and without a prefix-cache hit.
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>

#include "kiln/engine/engine.h"
#include "kiln/engine/runtime.h"
#include "kiln/engine/tokenizer_text.h"
#include "model_harness.h"
#include "tiny_runtime.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// Logprob of prompt[p] after prompt[0..p) for p = 1..n-1, from eager decode steps.
std::vector<double> reference_scores(engine::Runtime& eager, const std::vector<int32_t>& prompt) {
  ModelHarness h(eager.executor(), eager.kv_pool());
  Sequence seq;
  std::vector<double> out;
  for (size_t p = 0; p + 1 < prompt.size(); ++p) {
    const std::vector<float> row = h.step({&seq}, {{prompt[p]}})[0];
    double mx = row[0];
    for (float l : row) mx = std::max<double>(mx, l);
    double z = 0;
    for (float l : row) z += std::exp(l - mx);
    out.push_back(row[static_cast<size_t>(prompt[p + 1])] - (mx + std::log(z)));
  }
  h.release(seq);
  return out;
}

// Runs one request to completion and returns its final state.
struct Scored {
  std::vector<engine::TokenLogprob> prompt;
  std::vector<int32_t> output;
  int cached = 0;
};
Scored run(engine::Engine& eng, const engine::GenerateRequest& r) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Scored s;
  eng.submit(r, [&](const engine::RequestEvent& e) {
    std::lock_guard lk(mu);
    if (!e.prompt_logprobs.empty()) s.prompt = e.prompt_logprobs;
    s.output.insert(s.output.end(), e.new_tokens.begin(), e.new_tokens.end());
    s.cached = e.cached_tokens;
    if (e.finished) {
      done = true;
      cv.notify_all();
    }
  });
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return done; });
  return s;
}

class PromptScoringModel : public ::testing::TestWithParam<std::string> {};

TEST_P(PromptScoringModel, MatchesAFullForwardInEagerAndGraphModeWithAndWithoutCacheHits) {
  const fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing: " << model;
  engine::Runtime eager(tiny_runtime_options(model, engine::GraphMode::Off, 1));
  std::mt19937 rng(7);
  std::vector<int32_t> prompt;
  const int64_t vocab = eager.info().vocab_size;
  for (int i = 0; i < 75; ++i) prompt.push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
  const std::vector<double> want = reference_scores(eager, prompt);

  for (engine::GraphMode mode : {engine::GraphMode::Off, engine::GraphMode::Optimize}) {
    engine::Runtime rt(tiny_runtime_options(model, mode, 4));
    engine::TokenizerText text(rt.tokenizer());
    engine::EngineConfig cfg;
    cfg.chunked_prefill_size = 48;  // scoring chunks and a plain chunk boundary inside
    engine::Engine eng(rt.executor(), rt.kv_pool(), text, cfg);
    engine::GenerateRequest plain;
    plain.prompt_ids = prompt;
    plain.sampling.temperature = 0;
    plain.stop.max_new_tokens = 4;
    plain.stop.ignore_eos = true;
    const Scored first = run(eng, plain);  // fills the prefix cache
    for (int from : {0, 40}) {
      engine::GenerateRequest r = plain;
      r.prompt_logprobs_from = from;
      r.logprobs = 1;
      const Scored got = run(eng, r);
      const std::string where =
          std::string(engine::graph_mode_name(mode)) + " from " + std::to_string(from);
      EXPECT_EQ(got.output, first.output) << where;
      if (from > 0) {
        EXPECT_GT(got.cached, 0) << where << ": expected a prefix-cache hit";
      }
      const size_t skip = static_cast<size_t>(std::max(from, 1) - 1);
      ASSERT_EQ(got.prompt.size(), want.size() - skip) << where;
      for (size_t i = 0; i < got.prompt.size(); ++i) {
        EXPECT_EQ(got.prompt[i].token, prompt[skip + i + 1]) << where;
        EXPECT_NEAR(got.prompt[i].logprob, want[skip + i], 2e-3) << where << " position " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, PromptScoringModel, ::testing::ValuesIn(kTinyModels),
                         model_param_name);

}  // namespace
}  // namespace kiln::testing
