// --check-graph on the tiny random-weight models: every graph-mode decode step is checked
// against eager mode and passes (greedy and logits plans, padded batches); a checker with an
// impossible tolerance reports the first compared node, proving that the comparison can fail;
// and the checked run still produces exactly the tokens of an unchecked one.
#include "kiln/engine/graph_mode/graph_checker.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/model_harness.h"
#include "kiln/engine/graph_mode/graph_runner.h"
#include "kiln/engine/model_runner.h"
#include "kiln/engine/runtime.h"
#include "tiny_models.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

engine::RuntimeOptions options(const fs::path& model, bool check) {
  engine::RuntimeOptions o;
  o.model_path = model.string();
  o.threads = 2;
  o.max_graph_bs = 4;
  o.kv_tokens = 4096;
  o.context_length = 256;
  o.compile_cache = false;
  o.check_graph = check;
  return o;
}

// Prefills three prompts, then decodes `steps` steps of all three as one batch (padded to 4).
std::vector<int32_t> run_steps(engine::Runtime& rt, bool greedy, int steps) {
  ModelHarness h(rt.executor(), rt.kv_pool());
  Sequence a, b, c;
  h.step({&a}, {{5, 6, 7, 8}});
  h.step({&b}, {{9}});
  h.step({&c}, {{10, 11}});
  std::vector<int32_t> next = {12, 13, 14}, seen;
  for (int s = 0; s < steps; ++s) {
    bool used = false;
    auto rows = h.step({&a, &b, &c}, {{next[0]}, {next[1]}, {next[2]}}, greedy, &used);
    EXPECT_TRUE(used) << "decode step " << s << " should run in graph mode";
    for (int i = 0; i < 3; ++i) {
      next[i] = greedy ? static_cast<int32_t>(rows[i][0]) : argmax(rows[i]);
      seen.push_back(next[i]);
    }
  }
  return seen;
}

class GraphCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphCheck, EveryStepMatchesEager) {
  fs::path model = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::Runtime checked(options(model, true));
  ASSERT_NE(checked.graph_checker(), nullptr);
  engine::Runtime plain(options(model, false));
  for (bool greedy : {true, false}) {
    SCOPED_TRACE(greedy ? "greedy plans" : "logits plans");
    const int64_t before = checked.graph_checker()->steps_checked();
    auto got = run_steps(checked, greedy, 6);
    auto want = run_steps(plain, greedy, 6);
    EXPECT_EQ(got, want) << "checking must not change what graph mode computes";
    // 6 decode steps, plus sequence b's one-token prompt: a batch of one row is a decode step.
    EXPECT_EQ(checked.graph_checker()->steps_checked() - before, 7);
  }
  EXPECT_EQ(checked.graph_checker()->steps_failed(), 0);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, GraphCheck,
                         ::testing::Values("tiny-gemma3", "tiny-llama", "tiny-qwen3"),
                         model_param_name);

// With a negative tolerance nothing can match: the checker must say so, naming the first node
// it compared (the first non-view node of the traced graph) and the step.
TEST(GraphCheckDetects, ReportsFirstDivergingNode) {
  fs::path model = tiny_model("tiny-gemma3");
  ASSERT_TRUE(fs::exists(model)) << "fixture missing (run tests/fixtures/generate_all.py): "
                                 << model;
  engine::Runtime rt(options(model, false));
  std::vector<std::string> lines;
  engine::GraphCheckOptions co;
  co.atol = -1;
  co.rtol = 0;
  co.report = [&](const std::string& l) { lines.push_back(l); };
  engine::GraphRunnerOptions captured;
  captured.batch_sizes = {1, 2, 3, 4};
  engine::GraphChecker checker(rt.model_runner(), *rt.graph_runner(), rt.weights(), rt.kv_pool(),
                               *rt.thread_pool(), captured, co);
  ModelHarness h(rt.executor(), rt.kv_pool());
  Sequence a;
  h.step({&a}, {{5, 6, 7}});
  std::vector<int32_t> pages = a.pages;
  engine::StepBatch b;
  b.token_ids = {8};
  b.positions = {3};
  b.token_seq = {0};
  b.slots = {pages[0] * rt.kv_pool().page_size() + 3};
  b.seqs = {{pages, 4, true}};
  b.greedy_only = false;
  engine::StepOutput out;
  engine::GraphCheckResult r = checker.step(b, out);
  ASSERT_TRUE(r.first_divergence.has_value());
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.outputs_match);
  EXPECT_EQ(checker.steps_failed(), 1);
  // The first node the plan executes that has a value: no view, no source.
  const graph::Graph g = rt.model_runner().trace(rt.model_runner().shape_of(b));
  int first = -1;
  for (int i = 0; i < g.num_nodes() && first < 0; ++i) {
    if (!g.node(i).is_source() && !graph::output_is_view(g.node(i))) first = i;
  }
  EXPECT_EQ(r.first_divergence->node, first);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("check-graph: step 1 first divergence at node %" + std::to_string(first) +
                          " ("),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(out.logits.size(), static_cast<size_t>(rt.info().vocab_size))
      << "the real output is still delivered";
}

}  // namespace
}  // namespace kiln::testing
