// Capture of all plans from one optimized template per output kind, shared outputs and kernel
// work between plans, and the compile cache reproducing a cold capture exactly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "engine/model_harness.h"
#include "engine/tiny_runtime.h"
#include "kiln/engine/graph_mode/graph_runner.h"
#include "kiln/engine/runtime.h"
#include "kiln/graph/printer.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// Everything capture decided for one plan, as text: optimized IR, memory plan, step counts.
std::string describe(const graph::Plan& p) {
  std::string s = graph::print(p.graph());
  const graph::MemoryPlan& m = p.memory();
  s += "arena " + std::to_string(m.arena_bytes) + " planned " + std::to_string(m.planned_bytes);
  for (const auto& b : m.buffers) {
    s += " [" + std::to_string(b.value.node) + ":" + std::to_string(b.value.index) + " @" +
         std::to_string(b.offset) + "+" + std::to_string(b.size) + " " + std::to_string(b.first) +
         ".." + std::to_string(b.last) + "]";
  }
  s += " steps " + std::to_string(p.stats().steps) + " barriers " +
       std::to_string(p.stats().barriers) + " scratch " + std::to_string(p.scratch_bytes());
  return s;
}

class GraphCapture : public ::testing::TestWithParam<std::string> {};

// Cold: every plan comes from the template (none needs the per-plan pipeline). Warm: the cache
// entry gives back exactly the plans the cold capture made.
TEST_P(GraphCapture, CacheHitReproducesTheColdPlansExactly) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  fs::path dir =
      fs::temp_directory_path() / ("kiln-capture-" + GetParam() + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  engine::RuntimeOptions o = tiny_runtime_options(model, engine::GraphMode::Optimize, 6);
  o.compile_cache = true;
  o.cache_dir = dir.string();
  std::vector<std::string> cold, warm;
  for (auto* out : {&cold, &warm}) {
    engine::Runtime rt(o);
    engine::GraphRunner* gr = rt.graph_runner();
    ASSERT_NE(gr, nullptr);
    const engine::CaptureStats& st = gr->capture_stats();
    EXPECT_EQ(st.cache_hit, out == &warm);
    EXPECT_EQ(st.plans, 12);
    if (out == &cold) {
      EXPECT_EQ(st.rebatched_plans, st.plans) << st.pass_report;
    }
    EXPECT_FALSE(st.pass_report.empty());
    for (int bs = 1; bs <= 6; ++bs) {
      for (bool greedy : {true, false}) {
        graph::Plan* p = gr->plan_for(bs, greedy);
        ASSERT_NE(p, nullptr);
        out->push_back(describe(*p));
      }
    }
  }
  ASSERT_EQ(cold.size(), warm.size());
  for (size_t i = 0; i < cold.size(); ++i) EXPECT_EQ(warm[i], cold[i]) << "plan " << i;
  fs::remove_all(dir);
}

// Plans share their outputs and attention work lists: sizes alternate between two plans of
// each kind, and every step must still equal eager mode (a replay of one plan leaves nothing
// behind that another plan's next replay reads).
TEST_P(GraphCapture, InterleavedPlansMatchEager) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing: " << model;
  engine::Runtime graph(tiny_runtime_options(model, engine::GraphMode::Optimize, 8));
  engine::Runtime eager(tiny_runtime_options(model, engine::GraphMode::Off, 1));
  const engine::CaptureStats& st = graph.graph_runner()->capture_stats();
  // One output region for all plans: the largest plan's logits, not the sum over plans.
  EXPECT_EQ(st.output_bytes, graph.graph_runner()->plan_for(8, false)->output_bytes());

  ModelHarness hg(graph.executor(), graph.kv_pool()), he(eager.executor(), eager.kv_pool());
  const int64_t vocab = eager.info().vocab_size;
  std::mt19937 rng(7);
  std::vector<Sequence> sg(11), se(11);
  for (int i = 0; i < 11; ++i) {
    std::vector<int32_t> prompt(1 + rng() % 40);
    for (auto& t : prompt) t = static_cast<int32_t>(3 + rng() % (vocab - 3));
    hg.step({&sg[i]}, {prompt});
    he.step({&se[i]}, {prompt});
  }
  for (int step = 0; step < 8; ++step) {
    const bool small = step % 2 == 0;
    const bool greedy = step % 4 < 2;
    const int first = small ? 0 : 3, n = small ? 3 : 8;
    std::vector<Sequence*> pg, pe;
    std::vector<std::vector<int32_t>> toks;
    for (int i = first; i < first + n; ++i) {
      pg.push_back(&sg[i]);
      pe.push_back(&se[i]);
      toks.push_back({static_cast<int32_t>(3 + rng() % (vocab - 3))});
    }
    SCOPED_TRACE(::testing::Message() << "step " << step << " batch " << n << " greedy " << greedy);
    bool used = false;
    auto got = hg.step(pg, toks, greedy, &used);
    auto want = he.step(pe, toks, greedy);
    EXPECT_TRUE(used);
    EXPECT_EQ(got, want);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyModels, GraphCapture,
                         ::testing::Values("tiny-gemma3", "tiny-llama", "tiny-qwen3"),
                         model_param_name);

}  // namespace
}  // namespace kiln::testing
