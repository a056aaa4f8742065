// Speculative decoding on every tiny random-weight architecture: greedy output with n-gram
// proposals equals plain decoding token for token, in eager mode and graph mode, at batch 1
// and with requests arriving mid-flight (mixed steps, several decoding at once). Verify steps
// run the real kernels with several query rows per sequence, so this is where "a row's output
// does not depend on the rows beside it" is put to work.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "kiln/base/error.h"
#include "kiln/engine/draft_model_proposer.h"
#include "kiln/engine/graph_mode/graph_checker.h"
#include "kiln/engine/graph_mode/graph_runner.h"
#include "kiln/engine/runtime.h"
#include "kiln/engine/scheduler.h"
#include "kiln/engine/tokenizer_text.h"
#include "tiny_runtime.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// A prompt that repeats a random phrase, so the output has something to copy (and tiny
// random models tend to loop, which proposals also catch).
engine::GenerateRequest request(int phrase_len, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> phrase;
  for (int i = 0; i < phrase_len; ++i)
    phrase.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(vocab - 3)));
  engine::GenerateRequest r;
  for (int rep = 0; rep < 3; ++rep)
    r.prompt_ids.insert(r.prompt_ids.end(), phrase.begin(), phrase.end());
  r.sampling.temperature = 0.0;
  r.stop.max_new_tokens = 40;
  r.stop.ignore_eos = true;
  return r;
}

// Graph mode with verify plans for the whole test batch (6 proposals, up to 8 sequences).
engine::RuntimeOptions graph_with_verify_plans(const fs::path& model) {
  engine::RuntimeOptions o = tiny_runtime_options(model, engine::GraphMode::Optimize, 8);
  o.verify_max_seqs = 8;
  o.verify_max_draft = 6;
  return o;
}

struct RunResult {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  engine::EngineStats stats;
};

// `n` requests start; after two steps `n` more arrive (mixed steps while the first decode).
// `draft`: propose with this runtime's model (else n-gram lookup when `speculate`).
// `temperature` > 0: sampled requests (seeded by their id).
RunResult run(engine::Runtime& rt, int n, bool speculate, engine::Runtime* draft = nullptr,
              double temperature = 0.0) {
  engine::EngineConfig ec;
  ec.enable_prefix_cache = false;
  ec.speculative.ngram = speculate && draft == nullptr;
  engine::SpeculativeResources resources;
  if (speculate && draft != nullptr) {
    ec.speculative.draft_model = true;
    resources.draft_executor = &draft->executor();
    resources.draft_pool = &draft->kv_pool();
  }
  ec.speculative.num_draft_tokens = 6;
  ec.speculative.max_batch = 8;
  // Rows cost nothing to the policy: it never caps proposals here (it has tests of its own).
  resources.step_cost = [](int64_t) { return 1.0; };
  engine::TokenizerText text(rt.tokenizer());
  engine::Scheduler sched(rt.executor(), rt.kv_pool(), text, ec, resources);
  RunResult out;
  auto on_event = [&out](const engine::RequestEvent& e) {
    EXPECT_TRUE(e.error.empty()) << e.error;
    auto& t = out.tokens[e.request_id];
    t.insert(t.end(), e.new_tokens.begin(), e.new_tokens.end());
  };
  const int64_t vocab = rt.info().vocab_size;
  uint64_t id = 1;
  auto make = [&](int phrase_len) {
    engine::GenerateRequest r = request(phrase_len, 200 + id, vocab);
    r.sampling.temperature = temperature;
    return r;
  };
  for (int i = 0; i < n; ++i, ++id) sched.add(id, make(4 + i), on_event, id);
  sched.step();
  sched.step();
  for (int i = 0; i < n; ++i, ++id) sched.add(id, make(5 + i), on_event, id);
  for (int guard = 0; !sched.idle() && guard < 100000; ++guard) sched.step();
  EXPECT_TRUE(sched.idle());
  out.stats = sched.stats();
  EXPECT_EQ(out.stats.kv_pages_used, 0);
  return out;
}

class SpeculativeTiny : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeTiny, GreedyNgramOutputEqualsPlainDecodingInBothModes) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::Runtime eager(tiny_runtime_options(model, engine::GraphMode::Off, 1));
  engine::RuntimeOptions graph_options = graph_with_verify_plans(model);
  engine::Runtime graph(graph_options);
  for (int n : {1, 3}) {
    SCOPED_TRACE("requests per wave " + std::to_string(n));
    const RunResult plain = run(graph, n, false);
    const int64_t verify_replays = graph.graph_runner()->verify_replays();
    const RunResult graph_spec = run(graph, n, true);
    const RunResult eager_spec = run(eager, n, true);
    ASSERT_EQ(plain.tokens.size(), static_cast<size_t>(2 * n));
    for (const auto& [id, toks] : plain.tokens) EXPECT_EQ(toks.size(), 40u) << "request " << id;
    EXPECT_EQ(graph_spec.tokens, plain.tokens);
    EXPECT_EQ(eager_spec.tokens, plain.tokens);
    EXPECT_GT(graph_spec.stats.spec_verify_steps, 0);
    EXPECT_GT(graph_spec.stats.spec_accepted_tokens, 0);
    EXPECT_GT(plain.stats.graph_steps, 0);
    // Verify steps replayed captured plans (those without a prompt chunk beside them), and the
    // step-time statistics count each of them as a graph verify step; eager mode's as eager.
    EXPECT_GT(graph.graph_runner()->verify_replays(), verify_replays);
    const auto steps = [](const RunResult& r, engine::StepKind kind) {
      return r.stats.step_time[static_cast<size_t>(kind)].steps;
    };
    EXPECT_EQ(steps(graph_spec, engine::StepKind::VerifyGraph),
              graph.graph_runner()->verify_replays() - verify_replays);
    EXPECT_EQ(steps(graph_spec, engine::StepKind::VerifyEager), 0);
    EXPECT_GT(steps(eager_spec, engine::StepKind::VerifyEager), 0);
    EXPECT_EQ(steps(eager_spec, engine::StepKind::VerifyGraph), 0);
    EXPECT_EQ(steps(eager_spec, engine::StepKind::DecodeGraph), 0);
  }
}

// A draft model: the tiny model drafting for itself (every proposal accepted, so verify steps
// carry whole rounds) and, for the eager target, the graph-mode runtime drafting: greedy output
// is plain decoding's either way. The draft runtime shares the target's threads.
TEST_P(SpeculativeTiny, GreedyDraftModelOutputEqualsPlainDecoding) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::RuntimeOptions graph_options = graph_with_verify_plans(model);
  engine::Runtime graph(graph_options);
  engine::RuntimeOptions draft_options =
      tiny_runtime_options(model, engine::GraphMode::Optimize, 8);
  draft_options.verify_max_seqs = 8;
  draft_options.verify_max_draft = 3;
  draft_options.shared_threads = graph.thread_pool();
  engine::Runtime draft(draft_options);
  engine::Runtime eager(tiny_runtime_options(model, engine::GraphMode::Off, 1));
  for (int n : {1, 3}) {
    SCOPED_TRACE("requests per wave " + std::to_string(n));
    const RunResult plain = run(graph, n, false);
    const RunResult graph_spec = run(graph, n, true, &draft);
    EXPECT_EQ(graph_spec.tokens, plain.tokens);
    EXPECT_EQ(graph_spec.stats.spec_accepted_tokens, graph_spec.stats.spec_proposed_tokens);
    EXPECT_GT(graph_spec.stats.spec_accepted_tokens, 0);
    const RunResult eager_spec = run(eager, n, true, &graph);
    EXPECT_EQ(eager_spec.tokens, plain.tokens);
    EXPECT_GT(eager_spec.stats.spec_accepted_tokens, 0);
    EXPECT_EQ(draft.kv_pool().used_pages(), 0);
  }
}

// Sampled requests speculate through the acceptance rule, in graph mode on logits verify plans:
// the logits are the eager interpreter's bits and the draws the same seeded ones, so graph and
// eager mode give the same tokens.
TEST_P(SpeculativeTiny, SampledSpeculationIsTheSameInGraphAndEagerMode) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::RuntimeOptions graph_options = graph_with_verify_plans(model);
  engine::Runtime graph(graph_options);
  engine::Runtime eager(tiny_runtime_options(model, engine::GraphMode::Off, 1));
  engine::RuntimeOptions draft_options = tiny_runtime_options(model, engine::GraphMode::Off, 1);
  draft_options.shared_threads = graph.thread_pool();
  engine::Runtime draft(draft_options);
  const int64_t before = graph.graph_runner()->verify_replays();
  const RunResult in_graph = run(graph, 3, true, &draft, 0.8);
  const RunResult in_eager = run(eager, 3, true, &draft, 0.8);
  EXPECT_EQ(in_graph.tokens, in_eager.tokens);
  EXPECT_GT(in_graph.stats.spec_verify_steps, 0);
  EXPECT_GT(graph.graph_runner()->verify_replays(), before);
}

// --check-graph on verify steps: the replay-mode verify plan matches eager node by node and the
// optimized one matches at its outputs, on every verify step it takes.
TEST_P(SpeculativeTiny, VerifyPlansMatchEagerUnderTheGraphChecker) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::RuntimeOptions o = graph_with_verify_plans(model);
  o.check_graph = true;
  engine::Runtime checked(o);
  const RunResult spec = run(checked, 3, true);
  EXPECT_GT(spec.stats.spec_verify_steps, 0);
  EXPECT_GT(checked.graph_runner()->verify_replays(), 0);
  EXPECT_GE(checked.graph_checker()->steps_checked(), checked.graph_runner()->verify_replays());
  EXPECT_EQ(checked.graph_checker()->steps_failed(), 0);
}

// The tiny models have vocabularies of their own: a draft from another family is refused,
// naming the difference; the same tokenizer passes.
TEST(SpeculativeDraftVocabulary, AnotherTokenizerIsRefused) {
  fs::path llama = tiny_model("tiny-llama"), qwen = tiny_model("tiny-qwen2");
  ASSERT_TRUE(fs::exists(llama) && fs::exists(qwen));
  engine::Runtime a(tiny_runtime_options(llama, engine::GraphMode::Off, 1));
  engine::Runtime b(tiny_runtime_options(qwen, engine::GraphMode::Off, 1));
  EXPECT_NO_THROW(engine::check_draft_vocabulary(a.tokenizer(), a.info().vocab_size, a.tokenizer(),
                                                 a.info().vocab_size));
  try {
    engine::check_draft_vocabulary(a.tokenizer(), a.info().vocab_size, b.tokenizer(),
                                   b.info().vocab_size);
    ADD_FAILURE() << "tiny-qwen2 was accepted as a draft for tiny-llama";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("must share the target's tokenizer"), std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, SpeculativeTiny, ::testing::ValuesIn(kTinyModels),
                         model_param_name);

}  // namespace
}  // namespace kiln::testing
