// The q8 KV cache end to end on the tiny random-weight models: graph mode equals eager mode
// token for token and logit for logit, a sequence's logits do not depend on the batch it
// shares, q8 logits stay close to the f16 cache's, and the compile cache keeps them apart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "kiln/engine/graph_mode/graph_runner.h"
#include "kiln/engine/runtime.h"
#include "model_harness.h"
#include "tiny_runtime.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

engine::RuntimeOptions q8_options(const fs::path& model, engine::GraphMode mode, int max_bs) {
  engine::RuntimeOptions o = tiny_runtime_options(model, mode, max_bs);
  o.kv_dtype = kernels::KvDtype::Q8;
  return o;
}

// Prefills every prompt alone, then decodes `steps` tokens for all of them as one batch,
// feeding back each sequence's argmax. Returns every decode step's logits per sequence.
std::vector<std::vector<std::vector<float>>> decode(engine::Runtime& rt,
                                                    const std::vector<std::vector<int32_t>>& ps,
                                                    int steps, int* graph_steps = nullptr) {
  ModelHarness h(rt.executor(), rt.kv_pool());
  std::vector<Sequence> seqs(ps.size());
  std::vector<Sequence*> all;
  std::vector<int32_t> next(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    all.push_back(&seqs[i]);
    next[i] = argmax(h.step({&seqs[i]}, {ps[i]})[0]);
  }
  std::vector<std::vector<std::vector<float>>> out(ps.size());
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<int32_t>> toks;
    for (int32_t t : next) toks.push_back({t});
    bool used = false;
    auto rows = h.step(all, toks, false, &used);
    if (used && graph_steps != nullptr) ++*graph_steps;
    for (size_t i = 0; i < ps.size(); ++i) {
      next[i] = argmax(rows[i]);
      out[i].push_back(std::move(rows[i]));
    }
  }
  for (auto& s : seqs) h.release(s);
  return out;
}

std::vector<std::vector<int32_t>> tokens_of(const std::vector<std::vector<std::vector<float>>>& l) {
  std::vector<std::vector<int32_t>> out(l.size());
  for (size_t i = 0; i < l.size(); ++i)
    for (const auto& row : l[i]) out[i].push_back(argmax(row));
  return out;
}

class KvQ8 : public ::testing::TestWithParam<std::string> {
 protected:
  fs::path model() const {
    fs::path m = tiny_model(GetParam());
    EXPECT_TRUE(fs::exists(m)) << "fixture missing (run tests/fixtures/generate_all.py): " << m;
    return m;
  }
};

// Graph mode (optimized plans, fused QK-norm/RoPE/KV write) equals eager mode with a q8
// cache: the same logits bit for bit, so the same tokens, at several batch sizes (5 pads to a
// captured 8 with inert rows).
TEST_P(KvQ8, GraphEqualsEager) {
  const fs::path m = model();
  engine::Runtime eager(q8_options(m, engine::GraphMode::Off, 1));
  engine::Runtime graph(q8_options(m, engine::GraphMode::Optimize, 8));
  ASSERT_EQ(eager.kv_pool().dtype(), kernels::KvDtype::Q8);
  ASSERT_EQ(graph.kv_pool().dtype(), kernels::KvDtype::Q8);
  for (int bs : {1, 5, 8}) {
    SCOPED_TRACE("batch " + std::to_string(bs));
    auto ps = random_prompts(bs, eager.info().vocab_size, 4321 + bs);
    int graph_steps = 0;
    auto want = decode(eager, ps, 24);
    auto got = decode(graph, ps, 24, &graph_steps);
    EXPECT_EQ(graph_steps, 24) << "every decode step should replay a plan";
    EXPECT_EQ(tokens_of(got), tokens_of(want));
    for (size_t i = 0; i < ps.size(); ++i)
      for (size_t s = 0; s < want[i].size(); ++s)
        ASSERT_EQ(got[i][s], want[i][s]) << "sequence " << i << " step " << s;
  }
}

// A sequence's logits are the same bits alone and in a batch of unrelated sequences, in both
// modes.
TEST_P(KvQ8, BatchInvariant) {
  const fs::path m = model();
  for (auto mode : {engine::GraphMode::Off, engine::GraphMode::Optimize}) {
    SCOPED_TRACE(engine::graph_mode_name(mode));
    engine::Runtime rt(q8_options(m, mode, 8));
    auto ps = random_prompts(7, rt.info().vocab_size, 77);
    auto batch = decode(rt, ps, 16);
    for (size_t i : {size_t{0}, size_t{3}, size_t{6}}) {
      auto alone = decode(rt, {ps[i]}, 16);
      for (size_t s = 0; s < alone[0].size(); ++s)
        ASSERT_EQ(alone[0][s], batch[i][s]) << "sequence " << i << " step " << s;
    }
  }
}

// q8 changes the logits (the quantized cache is really read) but only a little: every row's
// next-token distribution over the same 80 tokens from an f16 and a q8 cache.
TEST_P(KvQ8, CloseToF16) {
  const fs::path m = model();
  engine::Runtime f16(tiny_runtime_options(m, engine::GraphMode::Off, 1));
  engine::Runtime q8(q8_options(m, engine::GraphMode::Off, 1));
  EXPECT_LT(q8.kv_pool().bytes() * 10, f16.kv_pool().bytes() * 6);
  const auto tokens = random_prompts(1, f16.info().vocab_size, 5)[0];
  std::vector<int32_t> text;
  while (text.size() < 80) text.insert(text.end(), tokens.begin(), tokens.end());
  text.resize(80);
  ModelHarness hf(f16.executor(), f16.kv_pool()), hq(q8.executor(), q8.kv_pool());
  Sequence sf, sq;
  const auto a = hf.step_all_rows(sf, text), b = hq.step_all_rows(sq, text);
  ASSERT_EQ(a.size(), b.size());
  // Per row, KL(f16 || q8) of the next-token distributions: a MoE router may pick another
  // expert for a slightly different input, so single logits can move more than the
  // distribution does.
  const size_t vocab = size_t(f16.info().vocab_size), rows = a.size() / vocab;
  double kl_sum = 0, kl_max = 0, max_diff = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* x = a.data() + r * vocab;
    const float* y = b.data() + r * vocab;
    const double mx = *std::max_element(x, x + vocab), my = *std::max_element(y, y + vocab);
    double zx = 0, zy = 0;
    for (size_t v = 0; v < vocab; ++v) {
      zx += std::exp(x[v] - mx);
      zy += std::exp(y[v] - my);
      max_diff = std::max(max_diff, double(std::fabs(x[v] - y[v])));
    }
    double kl = 0;
    for (size_t v = 0; v < vocab; ++v) {
      const double lp = x[v] - mx - std::log(zx), lq = y[v] - my - std::log(zy);
      kl += std::exp(lp) * (lp - lq);
    }
    kl_sum += kl;
    kl_max = std::max(kl_max, kl);
  }
  EXPECT_GT(max_diff, 0.0) << "q8 gave the f16 cache's logits exactly: is it used?";
  EXPECT_LT(kl_sum / double(rows), 0.01);
  std::printf("%s: KL(f16 || q8) mean %.3g max %.3g over %zu rows, max |logit diff| %.3g\n",
              GetParam().c_str(), kl_sum / double(rows), kl_max, rows, max_diff);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, KvQ8, ::testing::ValuesIn(kTinyModels), model_param_name);

// The compile cache key names the KV dtype: plans captured for an f16 pool are never loaded for
// a q8 one (their state input differs), and a q8 capture is reused by the next q8 start.
TEST(KvQ8CompileCache, DtypeIsPartOfTheKey) {
  const fs::path model = tiny_model("tiny-llama");
  ASSERT_TRUE(fs::exists(model)) << "fixture missing: " << model;
  const fs::path dir =
      fs::temp_directory_path() / ("kiln-kv-q8-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto opts = [&](kernels::KvDtype dtype) {
    engine::RuntimeOptions o = tiny_runtime_options(model, engine::GraphMode::Optimize, 2);
    o.compile_cache = true;
    o.cache_dir = dir.string();
    o.kv_dtype = dtype;
    return o;
  };
  {
    engine::Runtime f16(opts(kernels::KvDtype::F16));
    EXPECT_FALSE(f16.graph_runner()->capture_stats().cache_hit);
  }
  std::vector<int32_t> cold;
  {
    engine::Runtime q8(opts(kernels::KvDtype::Q8));
    EXPECT_FALSE(q8.graph_runner()->capture_stats().cache_hit) << "an f16 entry was reused";
    ModelHarness h(q8.executor(), q8.kv_pool());
    Sequence s;
    cold = h.greedy(s, 5, 12);
  }
  {
    engine::Runtime q8(opts(kernels::KvDtype::Q8));
    EXPECT_TRUE(q8.graph_runner()->capture_stats().cache_hit);
    ModelHarness h(q8.executor(), q8.kv_pool());
    Sequence s;
    EXPECT_EQ(h.greedy(s, 5, 12), cold);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::testing
