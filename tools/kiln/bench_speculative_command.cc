// `kiln bench speculative`: decode speed with and without speculative decoding, measured side
// by side in one process. The model (and the draft model) load once; every prompt is generated
// plainly and with the --speculative-* flags, the order alternating by round so a drift of the
// host's speed favours neither, and the summary gives each side's median decode tok/s with its
// range, the ratio of the medians with the range of the per-round ratios, tokens per step,
// proposals kept, and whether the texts are identical (greedy: they must be).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/engine.h"
#include "kiln/engine/runtime.h"
#include "kiln/model/chat_template.h"
#include "kiln/model/model_files.h"
#include "kiln/model/tokenizer.h"
#include "local_model_flags.h"
#include "order_stats.h"
#include "speculative_flags.h"

namespace kiln::cli {
namespace {

struct BenchSpeculativeArgs {
  LocalModelFlags local;
  SpeculativeFlags speculative;
  std::vector<std::string> prompts;       // -p
  std::vector<std::string> prompt_files;  // --prompt-file
  int n_predict = 160;
  int rounds = 3;
  bool chat = false;
};

struct Generation {
  std::string text;
  int tokens = 0;
  double decode_tok_s = 0;
  engine::RequestEvent last;
};

Generation generate(engine::Runtime& rt, const engine::EngineConfig& cfg,
                    const engine::SpeculativeResources& resources,
                    const std::vector<int32_t>& prompt, int n_predict) {
  engine::Engine eng(rt.executor(), rt.kv_pool(), rt.tokenizer(), cfg, resources);
  engine::GenerateRequest req;
  req.prompt_ids = prompt;
  req.sampling.temperature = 0.0;
  req.stop.max_new_tokens = n_predict;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Generation g;
  using clock = std::chrono::steady_clock;
  clock::time_point first{}, end{};
  eng.submit(req, [&](const engine::RequestEvent& ev) {
    std::lock_guard<std::mutex> lock(mu);
    if (!ev.new_tokens.empty() && first == clock::time_point{}) first = clock::now();
    g.text += ev.text_delta;
    if (ev.finished) {
      end = clock::now();
      g.last = ev;
      done = true;
      cv.notify_all();
    }
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  KILN_CHECK(g.last.error.empty(), "generation failed: {}", g.last.error);
  g.tokens = g.last.completion_tokens;
  // The first token comes with the prefill: decode speed counts the ones after it.
  const double seconds = std::chrono::duration<double>(end - first).count();
  g.decode_tok_s = std::max(0, g.tokens - 1) / std::max(seconds, 1e-9);
  return g;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  KILN_CHECK(in.good(), "cannot read prompt file {}", path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string range_text(const std::vector<double>& v, const char* format) {
  const std::string f = std::string(format) + " (" + format + "-" + format + ")";
  char buf[96];
  std::snprintf(buf, sizeof buf, f.c_str(), median(v), *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()));
  return buf;
}

void run_bench_speculative(const BenchSpeculativeArgs& a) {
  set_log_level(a.local.log_level);
  KILN_CHECK(a.speculative.algorithm != "none",
             "kiln bench speculative compares plain decoding with --speculative-algorithm "
             "ngram or standalone: name one");
  std::vector<std::pair<std::string, std::string>> prompts;  // name, text
  for (size_t i = 0; i < a.prompts.size(); ++i)
    prompts.emplace_back("prompt " + std::to_string(i + 1), a.prompts[i]);
  for (const std::string& f : a.prompt_files) prompts.emplace_back(f, read_file(f));
  KILN_CHECK(!prompts.empty(), "no prompt: give -p TEXT or --prompt-file FILE");
  const std::string model_path = model_or_default(a.local.model);
  std::optional<model::ChatTemplate> tmpl;
  if (a.chat) tmpl = model::detect_chat_template(model::read_chat_template(model_path));

  engine::SpeculativeConfig speculative = speculative_config(a.speculative);
  engine::RuntimeOptions opts = runtime_options(a.local);
  add_verify_plans(a.speculative, opts);
  engine::Runtime rt(opts);
  engine::SpeculativeResources draft_resources;
  const std::unique_ptr<engine::Runtime> draft =
      load_draft_model(a.speculative, opts, rt, draft_resources);
  engine::EngineConfig plain_cfg, spec_cfg;
  spec_cfg.speculative = speculative;

  std::vector<std::vector<int32_t>> ids;
  for (const auto& [name, text] : prompts) {
    const std::string t = tmpl ? model::apply_chat_template(*tmpl, {{"user", text}}, true) : text;
    ids.push_back(rt.tokenizer().encode(t, /*add_special=*/true, /*parse_special=*/true));
    KILN_CHECK(static_cast<int64_t>(ids.back().size()) + a.n_predict <= rt.info().context_length,
               "{}: {} prompt tokens plus {} new tokens exceed the context of {}", name,
               ids.back().size(), a.n_predict, rt.info().context_length);
  }
  std::printf("%s, %d threads; speculative %s up to %d proposals; %d rounds, %d tokens at most\n",
              rt.info().name.c_str(), rt.thread_pool()->size(), a.speculative.algorithm.c_str(),
              a.speculative.num_draft_tokens, a.rounds, a.n_predict);
  const size_t n = prompts.size();
  std::vector<std::vector<double>> plain(n), spec(n), ratio(n);
  std::vector<Generation> reference(n), last_spec(n);
  std::vector<bool> identical(n, true);
  for (int round = 1; round <= a.rounds; ++round) {
    for (size_t p = 0; p < n; ++p) {
      Generation g[2];
      for (int k = 0; k < 2; ++k) {
        const bool speculate = (k == 0) == (round % 2 == 0);  // odd rounds: plain first
        g[speculate ? 1 : 0] = generate(
            rt, speculate ? spec_cfg : plain_cfg,
            speculate ? draft_resources : engine::SpeculativeResources{}, ids[p], a.n_predict);
      }
      if (round == 1) reference[p] = g[0];
      identical[p] =
          identical[p] && g[0].text == reference[p].text && g[1].text == reference[p].text;
      plain[p].push_back(g[0].decode_tok_s);
      spec[p].push_back(g[1].decode_tok_s);
      ratio[p].push_back(g[1].decode_tok_s / std::max(g[0].decode_tok_s, 1e-9));
      last_spec[p] = g[1];
      std::printf("round %d %-24s plain %6.1f tok/s  speculative %6.1f tok/s  %.2fx\n", round,
                  prompts[p].first.c_str(), g[0].decode_tok_s, g[1].decode_tok_s, ratio[p].back());
      std::fflush(stdout);
    }
  }
  std::printf("\n%-24s %20s %20s %20s %9s %11s  %s\n", "prompt", "plain tok/s", "speculative tok/s",
              "ratio (rounds)", "tok/step", "kept", "text");
  for (size_t p = 0; p < n; ++p) {
    const engine::RequestEvent& e = last_spec[p].last;
    const double per_step =
        e.completion_tokens / static_cast<double>(std::max(1, e.spec_verify_ct));
    char kept[32];
    std::snprintf(kept, sizeof kept, "%d/%d", e.spec_accepted, e.spec_proposed);
    std::printf("%-24s %20s %20s %20s %9.2f %11s  %s (%d tokens)\n", prompts[p].first.c_str(),
                range_text(plain[p], "%.1f").c_str(), range_text(spec[p], "%.1f").c_str(),
                (range_text(ratio[p], "%.2f") + "x").c_str(), per_step, kept,
                identical[p] ? "identical" : "DIFFERENT", reference[p].tokens);
  }
}

}  // namespace

void add_bench_speculative_command(CLI::App& bench) {
  auto a = std::make_shared<BenchSpeculativeArgs>();
  CLI::App* s = bench.add_subcommand(
      "speculative",
      "Decode speed with and without speculative decoding, alternating rounds in one process");
  add_local_model_flags(s, a->local);
  add_speculative_flags(s, a->speculative);
  s->add_option("-p,--prompt", a->prompts, "A prompt (repeatable)");
  s->add_option("--prompt-file", a->prompt_files, "A file holding a prompt (repeatable)")
      ->check(CLI::ExistingFile);
  s->add_option("-n,--n-predict", a->n_predict, "Most tokens generated per prompt")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  s->add_option("--rounds", a->rounds, "Rounds (each prompt plain and speculative once per round)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  s->add_flag("--chat", a->chat, "Wrap each prompt as a user message in the model's chat template");
  s->callback([a] { run_bench_speculative(*a); });
}

}  // namespace kiln::cli
