// Embedding requests (GenerateRequest::hidden) in the scheduler, on the tiny random-weight
// models: their prompt rows share steps with running generations (mixed steps) and are chunked
// like any prompt, and still give the very hidden states of one whole-prompt step of their own
// (every kernel is batch invariant), while the generations' tokens stay those of a run without
// them. Pages all return to the pool.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kiln/engine/runtime.h"
#include "kiln/engine/scheduler.h"
#include "kiln/engine/sequence_stepper.h"
#include "kiln/engine/tokenizer_text.h"
#include "kiln/model/embedding_pooling.h"
#include "tiny_runtime.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

engine::GenerateRequest generation(int prompt_len, uint64_t seed, int64_t vocab, int new_tokens) {
  engine::GenerateRequest r;
  r.prompt_ids = random_ids(prompt_len, seed, vocab);
  r.sampling.temperature = 0.0;
  r.stop.max_new_tokens = new_tokens;
  r.stop.ignore_eos = true;
  return r;
}

engine::GenerateRequest embedding(std::vector<int32_t> ids, bool every_row) {
  engine::GenerateRequest r;
  r.prompt_ids = std::move(ids);
  r.stop.max_new_tokens = 0;
  r.hidden = every_row ? engine::HiddenOutput::kMean : engine::HiddenOutput::kLastRow;
  return r;
}

struct SchedulerRun {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, std::vector<float>> hidden;
  engine::EngineStats stats;
};

// Four generations start decoding; then the embedding inputs arrive (ids 100..), half of them
// wanting the mean of every row, and prefill in chunks of at most 16 tokens beside the decode rows.
SchedulerRun run(engine::Runtime& rt, const std::vector<std::vector<int32_t>>& inputs,
                 int new_tokens = 40) {
  engine::EngineConfig ec;
  ec.chunked_prefill_size = 16;
  ec.max_prefill_tokens_while_decoding = 24;
  engine::TokenizerText text(rt.tokenizer());
  engine::Scheduler sched(rt.executor(), rt.kv_pool(), text, ec);
  SchedulerRun out;
  auto on_event = [&out](const engine::RequestEvent& e) {
    EXPECT_TRUE(e.error.empty()) << e.error;
    auto& t = out.tokens[e.request_id];
    t.insert(t.end(), e.new_tokens.begin(), e.new_tokens.end());
    if (e.finished && e.request_id >= 100) {
      EXPECT_EQ(e.finish_reason, engine::FinishReason::Length);
      out.hidden[e.request_id] = e.hidden;
    }
  };
  const int64_t vocab = rt.info().vocab_size;
  for (uint64_t id = 1; id <= 4; ++id)
    sched.add(id, generation(3 + static_cast<int>(id), id, vocab, new_tokens), on_event, id);
  EXPECT_TRUE(sched.step());  // prefills the generations; every later prompt row is embedding
  for (size_t i = 0; i < inputs.size(); ++i)
    sched.add(100 + i, embedding(inputs[i], i % 2 == 1), on_event, 1);
  for (int guard = 0; !sched.idle() && guard < 100000; ++guard) sched.step();
  EXPECT_TRUE(sched.idle());
  out.stats = sched.stats();
  EXPECT_EQ(out.stats.kv_pages_used - out.stats.kv_pages_cached, 0);
  return out;
}

// The hidden state of one whole-prompt step of its own: the last row's, or model::pool_hidden's
// mean of every row's (what the scheduler's running sum must equal bit for bit).
std::vector<float> alone(engine::Runtime& rt, const std::vector<int32_t>& ids, bool mean) {
  engine::SequenceStepper stepper(rt.executor(), rt.kv_pool());
  engine::SteppedSequence seq;
  const std::vector<float> rows = stepper.step_hidden(seq, ids, mean);
  stepper.release(seq);
  if (!mean) return rows;
  const auto dim = static_cast<int64_t>(rows.size() / ids.size());
  std::vector<float> out(static_cast<size_t>(dim));
  model::pool_hidden(rows.data(), static_cast<int64_t>(ids.size()), dim,
                     {model::Pooling::kMean, /*normalize=*/false}, out.data());
  return out;
}

class EmbeddingSteps : public ::testing::TestWithParam<std::string> {};

TEST_P(EmbeddingSteps, ShareStepsWithGenerationAndMatchAStepOfTheirOwn) {
  const fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::Runtime rt(tiny_runtime_options(model, engine::GraphMode::Optimize, 8));
  const auto inputs = random_prompts(8, rt.info().vocab_size, 5, 60);
  const SchedulerRun without = run(rt, {});
  const SchedulerRun with = run(rt, inputs);
  // Embedding rows rode along with decode rows, and the generations did not notice.
  EXPECT_GT(with.stats.mixed_steps, without.stats.mixed_steps);
  for (uint64_t id = 1; id <= 4; ++id) EXPECT_EQ(with.tokens.at(id), without.tokens.at(id)) << id;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<float>& got = with.hidden.at(100 + i);
    EXPECT_EQ(got, alone(rt, inputs[i], i % 2 == 1))
        << "input " << i << " (" << inputs[i].size() << " tokens)";
  }
}

// A pool of 12 pages and generations of 120 tokens (8 pages each): decode pages preempt
// embedding requests mid-prompt
// (their kept rows survive; the re-prefilled rows are not kept twice), and admission waits for
// pages instead of failing.
TEST_P(EmbeddingSteps, SurvivePreemptionInASmallPool) {
  const fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << model;
  engine::RuntimeOptions o = tiny_runtime_options(model, engine::GraphMode::Off, 8);
  o.kv_tokens = 12 * 16;
  engine::Runtime rt(o);
  const auto inputs = random_prompts(10, rt.info().vocab_size, 9, 60);
  const SchedulerRun with = run(rt, inputs, 120);
  EXPECT_GT(with.stats.preemptions, 0);
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_EQ(with.hidden.at(100 + i), alone(rt, inputs[i], i % 2 == 1)) << "input " << i;
}

INSTANTIATE_TEST_SUITE_P(TinyModels, EmbeddingSteps, ::testing::Values("tiny-llama", "tiny-qwen3"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace kiln::testing
