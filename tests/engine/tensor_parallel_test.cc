// Tensor parallelism end to end in one process: the ranks are threads joined by a ThreadGroup
// (tests/graph/thread_group.h) instead of MPI processes, each with its own Runtime holding only
// its shard, rank 0 driving the steps through its executor (which broadcasts every batch) and
// rank 1 in run_tp_follower. Under TP, graph mode must give eager mode's logits and tokens bit
// for bit; against one process, TP=2 sums two partial products per projection in another
// order, so its logits are close but not the same bits (docs/tensor-parallel.md): the first
// token of every prompt must agree, and the logits within a bound. (Token-for-token equality
// over a whole generation is checked across real processes on a natural-language prompt by
// tests/e2e/test_tensor_parallel.py; on these random-token prompts a near tie can flip a
// later token.)
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>

#include "graph/thread_group.h"
#include "kiln/engine/runtime.h"
#include "kiln/engine/tp_step_channel.h"
#include "model_harness.h"
#include "tiny_runtime.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

struct Generated {
  std::vector<std::vector<int32_t>> tokens;  // per prompt: the greedy continuation
  std::vector<std::vector<float>> logits;    // per prompt: its last prompt row's logits
  int graph_steps = 0;
};

// Prefills each prompt (logits path), then decodes `steps` greedy tokens for all as one batch
// (greedy path: the distributed argmax under TP).
Generated generate(engine::Runtime& rt, int n_prompts, int steps) {
  ModelHarness h(rt.executor(), rt.kv_pool());
  const auto ps = random_prompts(n_prompts, rt.info().vocab_size, 77, 40);
  std::vector<Sequence> seqs(ps.size());
  std::vector<Sequence*> all;
  std::vector<int32_t> next(ps.size());
  Generated g;
  for (size_t i = 0; i < ps.size(); ++i) {
    all.push_back(&seqs[i]);
    g.logits.push_back(h.step({&seqs[i]}, {ps[i]})[0]);
    next[i] = argmax(g.logits.back());
  }
  g.tokens.resize(ps.size());
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<int32_t>> toks;
    for (int32_t t : next) toks.push_back({t});
    bool used = false;
    auto rows = h.step(all, toks, /*greedy=*/true, &used);
    if (used) ++g.graph_steps;
    for (size_t i = 0; i < ps.size(); ++i) {
      next[i] = static_cast<int32_t>(rows[i][0]);
      g.tokens[i].push_back(next[i]);
    }
  }
  return g;
}

// The fixtures' tiny models, or the F32 conversion of an oracle case (tests/oracle) of an
// architecture the fixtures do not carry, named "oracle-<case>".
fs::path model_file(const std::string& name) {
  const std::string oracle = "oracle-";
  if (name.rfind(oracle, 0) != 0) return tiny_model(name);
  return fs::path(KILN_SOURCE_DIR) / "tests" / "oracle" / "data" / name.substr(oracle.size()) /
         "model.f32.gguf";
}

engine::RuntimeOptions options(const std::string& model, engine::GraphMode mode) {
  engine::RuntimeOptions o = tiny_runtime_options(model_file(model), mode, 4);
  o.threads = 1;
  return o;
}

// Runs generate() on rank 0 of `ranks` thread-ranks; the others follow. Rank r loads
// model_of_rank[r] when given (a mismatch test), else `model`.
Generated generate_tp(const std::string& model, engine::GraphMode mode, int ranks, int n_prompts,
                      int steps, const std::vector<std::string>& model_of_rank = {}) {
  ThreadGroup group(ranks);
  Generated result;
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto comm = group.member(r);
      try {
        engine::RuntimeOptions o = options(model_of_rank.empty() ? model : model_of_rank[r], mode);
        o.tp = comm.get();
        engine::Runtime rt(o);
        if (r == 0) {
          result = generate(rt, n_prompts, steps);
          rt.tp_shutdown();
        } else {
          rt.run_tp_follower();
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
        group.abort_all();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    if (!errors[r].empty()) throw Error("rank " + std::to_string(r) + ": " + errors[r]);
  }
  return result;
}

class TensorParallel : public ::testing::TestWithParam<std::string> {};

TEST_P(TensorParallel, GraphEqualsEagerUnderTpAndBothTrackOneProcess) {
  ASSERT_TRUE(fs::exists(model_file(GetParam()))) << "fixture missing: " << GetParam();
  engine::Runtime whole(options(GetParam(), engine::GraphMode::Off));
  const Generated want = generate(whole, 3, 12);
  const Generated eager = generate_tp(GetParam(), engine::GraphMode::Off, 2, 3, 12);
  const Generated graph = generate_tp(GetParam(), engine::GraphMode::Optimize, 2, 3, 12);
  EXPECT_EQ(graph.graph_steps, 12) << "every decode step should replay a captured plan";
  // Graph mode under TP: the same steps as eager mode under TP, so the same bits.
  EXPECT_EQ(graph.logits, eager.logits);
  EXPECT_EQ(graph.tokens, eager.tokens);
  for (size_t i = 0; i < want.logits.size(); ++i) {
    ASSERT_EQ(eager.logits[i].size(), want.logits[i].size());
    EXPECT_EQ(argmax(eager.logits[i]), argmax(want.logits[i])) << "prompt " << i;
    double worst = 0;
    for (size_t j = 0; j < want.logits[i].size(); ++j)
      worst = std::max(worst, std::abs(double(eager.logits[i][j]) - want.logits[i][j]));
    // Logits are O(1..10); a wrong shard (a missing head, a misplaced column) moves them by
    // O(1). A flipped int8 rounding of an activation after a last-bit difference moves them
    // by a few hundredths (0.08 seen on tiny-qwen3).
    EXPECT_LT(worst, 0.25) << "prompt " << i;
  }
}

// Every dense architecture; the -tp variants store attn_output in 32-value blocks so that it
// splits in two (tests/fixtures/make_models.py, TP_VARIANTS). Command-R and Falcon 40B: the
// parallel block (both branches all-reduced) and Falcon's fused attn_qkv, cut by rows.
INSTANTIATE_TEST_SUITE_P(DenseArchitectures, TensorParallel,
                         ::testing::Values("tiny-gemma3-tp", "tiny-llama", "tiny-qwen2",
                                           "tiny-qwen3", "tiny-mistral-tp", "oracle-command-r",
                                           "oracle-falcon-40b"),
                         model_param_name);

std::string tp_error(const std::string& model, int ranks) {
  try {
    generate_tp(model, engine::GraphMode::Off, ranks, 1, 1);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TensorParallelRefusals, QuantBlockCutMixtureOfExpertsAndUnevenHeads) {
  // tiny-gemma3's layer-0 attn_output is Q4_K with K = 256: 128 columns per rank is half a block.
  EXPECT_NE(tp_error("tiny-gemma3", 2).find("256-value blocks"), std::string::npos)
      << tp_error("tiny-gemma3", 2);
  EXPECT_NE(tp_error("tiny-qwen3moe", 2).find("mixture-of-experts"), std::string::npos);
  EXPECT_NE(tp_error("tiny-llama", 3).find("attention heads do not split 3 ways"),
            std::string::npos);
}

TEST(TensorParallelRefusals, RanksWithDifferentModelFilesStopAtStart) {
  // tiny-mistral and its -tp variant have the same shapes, names and norm weights except for
  // the dtype of some attn_output: the checksum still tells them apart.
  for (const auto& other : {"tiny-qwen2", "tiny-mistral-tp"}) {
    try {
      generate_tp("", engine::GraphMode::Off, 2, 1, 1,
                  {other == std::string("tiny-qwen2") ? "tiny-llama" : "tiny-mistral", other});
      ADD_FAILURE() << "expected a mismatch error with " << other;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("loaded a different model than rank 0"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(TensorParallelSteps, MessagesRoundTripAndBadOnesAreRefused) {
  engine::StepBatch b;
  b.token_ids = {5, 6, 7};
  b.positions = {0, 1, 9};
  b.token_seq = {0, 0, 1};
  b.slots = {16, 17, 41};
  b.greedy_only = true;
  b.seqs.resize(2);
  b.seqs[0].pages = {1};
  b.seqs[0].seq_len = 2;
  b.seqs[0].want_logits = false;
  b.seqs[1].pages = {4, 2};
  b.seqs[1].seq_len = 10;
  b.seqs[1].all_logits = true;
  const std::vector<char> bytes = engine::encode_step_message(&b, engine::StepMode::Graph);
  engine::StepBatch got;
  engine::StepMode mode = engine::StepMode::Auto;
  ASSERT_TRUE(engine::decode_step_message(bytes, got, &mode));
  // The mode travels: `kiln bench` forces eager or graph per step and every rank must follow.
  EXPECT_EQ(mode, engine::StepMode::Graph);
  engine::StepMode eager_mode = engine::StepMode::Auto;
  ASSERT_TRUE(engine::decode_step_message(engine::encode_step_message(&b, engine::StepMode::Eager),
                                          got, &eager_mode));
  EXPECT_EQ(eager_mode, engine::StepMode::Eager);
  EXPECT_EQ(got.token_ids, b.token_ids);
  EXPECT_EQ(got.positions, b.positions);
  EXPECT_EQ(got.token_seq, b.token_seq);
  EXPECT_EQ(got.slots, b.slots);
  EXPECT_TRUE(got.greedy_only);
  ASSERT_EQ(got.seqs.size(), 2u);
  EXPECT_EQ(got.seqs[1].pages, b.seqs[1].pages);
  EXPECT_EQ(got.seqs[1].seq_len, 10);
  EXPECT_FALSE(got.seqs[0].want_logits);
  EXPECT_TRUE(got.seqs[1].all_logits);
  EXPECT_FALSE(engine::decode_step_message(engine::encode_step_message(nullptr), got));
  for (size_t cut : {size_t{3}, bytes.size() / 2, bytes.size() - 1}) {
    const std::vector<char> truncated(bytes.begin(), bytes.begin() + static_cast<long>(cut));
    EXPECT_THROW(engine::decode_step_message(truncated, got), Error) << cut;
  }
  std::vector<char> bad_mode = bytes;
  bad_mode[8] = 7;  // after the 4-byte header and the 4-byte kind: the mode byte
  EXPECT_THROW(engine::decode_step_message(bad_mode, got), Error);
}

}  // namespace
}  // namespace kiln::testing
