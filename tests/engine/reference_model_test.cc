// kiln's forward pass against the independent numpy reference (tests/fixtures/reference_model.py)
// on every tiny random-weight model and on the default model: logits within tolerance and
// greedy continuations token for token, in eager mode and in graph mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/engine/graph_mode/graph_runner.h"
#include "kiln/engine/model_runner.h"
#include "kiln/engine/runtime.h"
#include "model_harness.h"
#include "tiny_models.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

struct RefCase {
  std::string name;
  fs::path model;
  std::vector<int32_t> prompt;
  std::vector<int32_t> positions;  // prompt positions with logits rows
  std::vector<int32_t> greedy;
  std::vector<double> margins;  // reference top-1 minus top-2 logit at each greedy step
  int64_t vocab = 0;
  std::vector<float> logits;  // [positions, vocab]
};

fs::path testdata() {
  const char* d = std::getenv("KILN_TESTDATA");
  return d ? fs::path(d) : fs::path();
}

std::vector<RefCase> load_cases(const std::string& model_dir) {
  std::vector<RefCase> cases;
  fs::path dir = testdata() / "ref" / model_dir;
  if (!fs::exists(dir)) return cases;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json" || entry.path().filename() == "stamp.json") continue;
    Json j = Json::parse(std::ifstream(entry.path()));
    RefCase c;
    c.name = j.at("case").get<std::string>();
    fs::path m = j.at("model").get<std::string>();
    c.model = m.is_absolute() ? m : testdata() / m;
    c.prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
    c.positions = j.at("logits_positions").get<std::vector<int32_t>>();
    c.greedy = j.at("greedy_ids").get<std::vector<int32_t>>();
    c.margins = j.at("greedy_margins").get<std::vector<double>>();
    c.vocab = j.at("n_vocab").get<int64_t>();
    std::ifstream f(dir / j.at("logits_file").get<std::string>(), std::ios::binary);
    c.logits.resize(c.positions.size() * c.vocab);
    f.read(reinterpret_cast<char*>(c.logits.data()),
           static_cast<std::streamsize>(c.logits.size() * 4));
    EXPECT_TRUE(f.good()) << "short logits file for " << c.name;
    cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(),
            [](const RefCase& a, const RefCase& b) { return a.name < b.name; });
  return cases;
}

// max |a - b| / max |b| over a row: the error relative to the row's scale.
double row_error(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

engine::RuntimeOptions options_for(const fs::path& model, engine::GraphMode mode) {
  engine::RuntimeOptions o;
  o.model_path = model.string();
  o.threads = 2;
  o.graph_mode = mode;
  o.max_graph_bs = 4;
  o.kv_tokens = 4096;
  o.compile_cache = false;  // tests never touch the user's compile cache
  if (const char* ps = std::getenv("KILN_TEST_PAGE_SIZE")) o.page_size = std::atoi(ps);
  return o;
}

// Tolerance on logits, relative to the row's largest |logit|. The reference reproduces the
// int8 activation quantization of quantized matmuls, but it quantizes float64 activations
// where kiln quantizes float32 ones: an activation within float32 rounding of a code boundary
// lands on the neighbouring code, and random-weight models amplify such flips through their
// layers. Measured: up to 2.9% on the default model (prefill, last position), 1.8% on the tiny
// ones.
double tolerance_for(const std::string& model) {
  const char* env = std::getenv("KILN_REF_TOL");
  if (env != nullptr) return std::atof(env);
  return model.find("gemma3-270m") != std::string::npos ? 0.04 : 0.025;
}

double max_abs(const float* row, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(static_cast<double>(row[i])));
  return m;
}

// Greedy continuations must agree token for token until the reference itself had a near-tie
// (top-2 margin within twice the logit tolerance); after one, both continuations are right.
void expect_same_greedy(const std::vector<int32_t>& got, const RefCase& c, double abs_tol) {
  for (size_t i = 0; i < c.greedy.size(); ++i) {
    if (got[i] == c.greedy[i]) continue;
    EXPECT_LT(c.margins[i], 2 * abs_tol)
        << "greedy token " << i << " differs (" << got[i] << " vs " << c.greedy[i]
        << ") although the reference margin was " << c.margins[i];
    return;
  }
}

void check_model(const std::string& model_dir) {
  auto cases = load_cases(model_dir);
  if (cases.empty())
    GTEST_SKIP() << "no reference fixtures for " << model_dir << " in " << testdata();
  const double tol = tolerance_for(model_dir);
  for (engine::GraphMode mode : {engine::GraphMode::Off, engine::GraphMode::Optimize}) {
    engine::Runtime rt(options_for(cases[0].model, mode));
    for (const RefCase& c : cases) {
      SCOPED_TRACE(model_dir + "/" + c.name + " graph-mode " + engine::graph_mode_name(mode));
      ModelHarness h(rt.executor(), rt.kv_pool());
      // Prefill the whole prompt in one step: logits of the last position.
      Sequence prefill;
      auto last = h.step({&prefill}, {c.prompt})[0];
      const float* ref_last = &c.logits[(c.positions.size() - 1) * c.vocab];
      double err = row_error(last.data(), ref_last, c.vocab);
      EXPECT_LT(err, tol) << "prefill logits of the last position";
      ::testing::Test::RecordProperty("prefill_error_" + c.name, std::to_string(err));
      // Greedy continuation, token for token.
      std::vector<int32_t> got =
          h.greedy(prefill, argmax(last), static_cast<int>(c.greedy.size()) - 1);
      got.insert(got.begin(), argmax(last));
      expect_same_greedy(got, c, tol * max_abs(ref_last, c.vocab));
      // Token-by-token decode reproduces every position's logits (the decode path).
      if (c.positions.size() == c.prompt.size()) {
        Sequence decode;
        for (size_t t = 0; t < c.prompt.size(); ++t) {
          auto row = h.step({&decode}, {{c.prompt[t]}})[0];
          EXPECT_LT(row_error(row.data(), &c.logits[t * c.vocab], c.vocab), tol)
              << "position " << t;
        }
      }
    }
  }
}

class ReferenceModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceModel, LogitsAndGreedyMatchNumpyReference) { check_model(GetParam()); }

INSTANTIATE_TEST_SUITE_P(TinyModels, ReferenceModel,
                         ::testing::Values("tiny-gemma3", "tiny-llama", "tiny-qwen2", "tiny-qwen3",
                                           "tiny-mistral", "tiny-qwen3moe", "tiny-quants",
                                           "gemma3-270m"),
                         model_param_name);

}  // namespace
}  // namespace kiln::testing
