// Graph mode against eager mode on the tiny random-weight models: greedy generation token for
// token over 64 steps at batch sizes 1, 3, 8 and 32 with mixed sequence lengths, identical
// logits, inert padding, replay without heap allocation, and the compile cache.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <random>

#include "engine/model_harness.h"
#include "engine/tiny_runtime.h"
#include "kiln/base/error.h"
#include "kiln/engine/graph_mode/graph_runner.h"
#include "kiln/engine/model_runner.h"
#include "kiln/engine/runtime.h"

// Counts heap allocations made through operator new while `g_count_allocs` is set.
static std::atomic<bool> g_count_allocs{false};
static std::atomic<int64_t> g_allocs{0};
// The replacements are not inlined: inlined into a caller, GCC pairs the operator new or delete
// it sees there with the malloc or free inside the other and warns (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t n) {
  if (g_count_allocs.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort's buffer uses them): libstdc++'s call the operator new
// above, but a sanitizer runtime's do not, and memory from its allocator reached the free()
// below (ASan: alloc-dealloc-mismatch).
[[gnu::noinline]] void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (g_count_allocs.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  return std::malloc(n == 0 ? 1 : n);
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// Prefills every prompt, then decodes `steps` greedy tokens for all sequences as one batch.
std::vector<std::vector<int32_t>> generate(engine::Runtime& rt,
                                           const std::vector<std::vector<int32_t>>& ps, int steps,
                                           bool greedy_plans, int* graph_steps) {
  ModelHarness h(rt.executor(), rt.kv_pool());
  std::vector<Sequence> seqs(ps.size());
  std::vector<Sequence*> all;
  std::vector<int32_t> next(ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    all.push_back(&seqs[i]);
    next[i] = argmax(h.step({&seqs[i]}, {ps[i]})[0]);
  }
  std::vector<std::vector<int32_t>> out(ps.size());
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<int32_t>> toks;
    for (int32_t t : next) toks.push_back({t});
    bool used = false;
    auto rows = h.step(all, toks, greedy_plans, &used);
    if (used && graph_steps) ++*graph_steps;
    for (size_t i = 0; i < ps.size(); ++i) {
      next[i] = greedy_plans ? static_cast<int32_t>(rows[i][0]) : argmax(rows[i]);
      out[i].push_back(next[i]);
    }
  }
  return out;
}

class GraphVsEager : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphVsEager, GreedyTokensIdenticalAcrossBatchSizes) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::Runtime eager(tiny_runtime_options(model, engine::GraphMode::Off, 1));
  engine::Runtime graph(tiny_runtime_options(model, engine::GraphMode::Optimize, 32));
  for (int bs : {1, 3, 8, 32}) {
    SCOPED_TRACE("batch " + std::to_string(bs));
    auto ps = random_prompts(bs, eager.info().vocab_size, 1234 + bs);
    int graph_steps = 0;
    auto want = generate(eager, ps, 64, true, nullptr);
    auto got = generate(graph, ps, 64, true, &graph_steps);
    EXPECT_EQ(graph_steps, 64) << "every decode step should replay a plan";
    EXPECT_EQ(got, want);
  }
}

// Logits plans (sampling path) give bit-identical logits to eager mode, batch padded to a
// captured size (5 -> 8 here) with inert rows.
TEST_P(GraphVsEager, LogitsBitIdenticalWithPadding) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::RuntimeOptions go = tiny_runtime_options(model, engine::GraphMode::Optimize, 8);
  engine::Runtime graph(go);
  engine::Runtime eager(tiny_runtime_options(model, engine::GraphMode::Off, 1));
  auto ps = random_prompts(5, eager.info().vocab_size, 99);
  ModelHarness he(eager.executor(), eager.kv_pool()), hg(graph.executor(), graph.kv_pool());
  std::vector<Sequence> se(5), sg(5);
  std::vector<Sequence*> pe, pg;
  std::vector<std::vector<int32_t>> toks;
  for (int i = 0; i < 5; ++i) {
    he.step({&se[i]}, {ps[i]});
    hg.step({&sg[i]}, {ps[i]});
    pe.push_back(&se[i]);
    pg.push_back(&sg[i]);
    toks.push_back({static_cast<int32_t>(7 + i)});
  }
  bool used = false;
  auto want = he.step(pe, toks);
  auto got = hg.step(pg, toks, false, &used);
  EXPECT_TRUE(used);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[i], want[i]) << "sequence " << i;
}

INSTANTIATE_TEST_SUITE_P(TinyModels, GraphVsEager, ::testing::ValuesIn(kTinyModels),
                         model_param_name);
// The weight types added after the K-quants (tests/fixtures/make_models.py), graph against eager.
INSTANTIATE_TEST_SUITE_P(QuantTypes, GraphVsEager, ::testing::Values("tiny-quants"),
                         model_param_name);

TEST(GraphReplay, NoHeapAllocationDuringReplay) {
  fs::path model = tiny_model("tiny-gemma3");
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::Runtime rt(tiny_runtime_options(model, engine::GraphMode::Optimize, 4));
  ModelHarness h(rt.executor(), rt.kv_pool());
  Sequence a, b, c;
  h.step({&a}, {{5, 6, 7}});
  h.step({&b}, {{8}});
  h.step({&c}, {{9, 10}});
  graph::Plan* plan = rt.graph_runner()->plan_for(3, true);
  ASSERT_NE(plan, nullptr);
  // Stage a real step through the runner once, then count allocations of bare replays.
  h.step({&a, &b, &c}, {{11}, {12}, {13}}, true);
  g_allocs = 0;
  g_count_allocs = true;
  for (int i = 0; i < 10; ++i) plan->replay(*rt.thread_pool());
  g_count_allocs = false;
  EXPECT_EQ(g_allocs.load(), 0);
}

// A forced graph-mode step (`kiln bench`'s) replays a batch a captured plan fits and refuses one
// that none fits (a prompt chunk; a decode batch above the largest captured size) with an error
// naming it, instead of running it eagerly; the ordinary path runs those eagerly.
TEST(GraphReplay, ForcedGraphStepRefusesABatchNoPlanFits) {
  fs::path model = tiny_model("tiny-llama");
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::Runtime rt(tiny_runtime_options(model, engine::GraphMode::Optimize, 2));
  const int page = rt.kv_pool().page_size();
  std::vector<int32_t> pages;
  ASSERT_TRUE(rt.kv_pool().alloc(3, pages));
  // `seqs` sequences of `rows` rows each, sequence s on page s.
  auto batch_of = [&](int seqs, int rows) {
    engine::StepBatch b;
    for (int s = 0; s < seqs; ++s) {
      for (int r = 0; r < rows; ++r) {
        b.token_ids.push_back(5 + r);
        b.positions.push_back(r);
        b.token_seq.push_back(s);
        b.slots.push_back(pages[static_cast<size_t>(s)] * page + r);
      }
      b.seqs.push_back({{pages[static_cast<size_t>(s)]}, rows, true});
    }
    b.greedy_only = true;
    return b;
  };
  engine::StepOutput out;
  rt.forward_in_mode(batch_of(2, 1), out, engine::StepMode::Graph);
  EXPECT_TRUE(out.used_graph);
  EXPECT_EQ(out.greedy_ids.size(), 2u);
  for (const engine::StepBatch& b : {batch_of(1, 3), batch_of(3, 1)}) {
    try {
      rt.forward_in_mode(b, out, engine::StepMode::Graph);
      ADD_FAILURE() << "a forced graph step ran a batch no plan fits";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no captured plan fits it"), std::string::npos)
          << e.what();
    }
    rt.forward_in_mode(b, out, engine::StepMode::Auto);
    EXPECT_FALSE(out.used_graph);
    EXPECT_EQ(static_cast<int64_t>(out.greedy_ids.size()), b.num_seqs());
  }
  rt.kv_pool().free(pages);
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// The compile cache end to end: a second runtime with the same configuration captures from
// the cache and replays identically; any key change misses; a damaged entry is rebuilt.
TEST(GraphCompileCache, WarmStartHitsAndKeyChangesMiss) {
  fs::path model = tiny_model("tiny-llama");
  ASSERT_TRUE(fs::exists(model)) << "fixture missing: " << model;
  fs::path dir = fs::temp_directory_path() / ("kiln-graph-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto opts = [&](int max_bs) {
    engine::RuntimeOptions o = tiny_runtime_options(model, engine::GraphMode::Optimize, max_bs);
    o.compile_cache = true;
    o.cache_dir = dir.string();
    return o;
  };
  std::vector<int32_t> cold_tokens, warm_tokens;
  {
    engine::Runtime rt(opts(4));
    EXPECT_FALSE(rt.graph_runner()->capture_stats().cache_hit);
    ModelHarness h(rt.executor(), rt.kv_pool());
    Sequence s;
    cold_tokens = h.greedy(s, 5, 16);
  }
  {
    engine::Runtime rt(opts(4));
    EXPECT_TRUE(rt.graph_runner()->capture_stats().cache_hit);
    ModelHarness h(rt.executor(), rt.kv_pool());
    Sequence s;
    warm_tokens = h.greedy(s, 5, 16);
  }
  EXPECT_EQ(warm_tokens, cold_tokens);
  {
    engine::Runtime rt(opts(3));  // other batch sizes: another key
    EXPECT_FALSE(rt.graph_runner()->capture_stats().cache_hit);
  }
  // Damage every entry: the next start reports it, rebuilds, and still generates the same.
  for (const auto& e : fs::directory_iterator(dir)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  {
    engine::Runtime rt(opts(4));
    EXPECT_FALSE(rt.graph_runner()->capture_stats().cache_hit);
    ModelHarness h(rt.executor(), rt.kv_pool());
    Sequence s;
    EXPECT_EQ(h.greedy(s, 5, 16), cold_tokens);
  }
  {
    engine::Runtime rt(opts(4));
    EXPECT_TRUE(rt.graph_runner()->capture_stats().cache_hit);  // rebuilt entry is good
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::testing

namespace kiln::testing {
namespace {

// Replay mode keeps the traced graph, whose Q/K/V projections share a level; forcing worker
// groups runs them on disjoint threads at the same time. Tokens must not change.
TEST(GraphWorkerGroups, DisjointGroupsMatchEager) {
  fs::path model = tiny_model("tiny-llama");
  ASSERT_TRUE(fs::exists(model)) << "fixture missing: " << model;
  engine::RuntimeOptions go = tiny_runtime_options(model, engine::GraphMode::Replay, 4);
  go.plan.group_threshold = 100.0;  // split every level with several nodes
  engine::Runtime graph(go);
  engine::Runtime eager(tiny_runtime_options(model, engine::GraphMode::Off, 1));
  graph::Plan* plan = graph.graph_runner()->plan_for(3, true);
  ASSERT_NE(plan, nullptr);
  EXPECT_GT(plan->stats().grouped_levels, 0);
  auto ps = random_prompts(3, eager.info().vocab_size, 7);
  int graph_steps = 0;
  EXPECT_EQ(generate(graph, ps, 24, true, &graph_steps), generate(eager, ps, 24, true, nullptr));
  EXPECT_EQ(graph_steps, 24);
}

}  // namespace
}  // namespace kiln::testing
