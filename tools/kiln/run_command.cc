// `kiln run`: one prompt through the engine, text streamed to stdout, then one summary line.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>

#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/engine.h"
#include "kiln/engine/graph_mode/graph_checker.h"
#include "kiln/engine/runtime.h"
#include "kiln/model/chat_template.h"
#include "kiln/model/model_files.h"
#include "kiln/model/tokenizer.h"
#include "local_model_flags.h"
#include "progress_bar.h"
#include "speculative_flags.h"
#include "tp_group.h"

namespace kiln::cli {
namespace {

struct RunArgs {
  LocalModelFlags local;
  SpeculativeFlags speculative;
  SamplingFlags sampling;
  std::string prompt;
  int n_predict = 128;
  bool ignore_eos = false;
  bool chat = false;
  TpArgs tp;
};

int run_on_rank(const RunArgs& a, Communicator* group) {
  // Decided before the weights load: a model whose chat template kiln cannot render fails at
  // once, with the reason, instead of after minutes of loading.
  std::optional<model::ChatTemplate> chat_template;
  if (a.chat) {
    chat_template =
        model::detect_chat_template(model::read_chat_template(model_or_default(a.local.model)));
  }
  ProgressBar bar;
  engine::SpeculativeConfig speculative = speculative_config(a.speculative);
  engine::RuntimeOptions opts = runtime_options(a.local);
  opts.tp = group;
  add_verify_plans(a.speculative, opts);
  const bool leader = group == nullptr || group->rank() == 0;
  if (leader) {
    opts.progress = [&](const char* stage, int64_t done, int64_t total) {
      bar.update(stage, done, total);
    };
  }
  engine::Runtime rt(opts);
  // Ranks other than 0 run the steps rank 0 broadcasts; rank 0 does everything else.
  if (!leader) {
    rt.run_tp_follower();
    return 0;
  }
  engine::SpeculativeResources draft_resources;
  const std::unique_ptr<engine::Runtime> draft =
      load_draft_model(a.speculative, opts, rt, draft_resources);
  const model::Tokenizer& tok = rt.tokenizer();

  std::string text = a.prompt;
  if (chat_template) text = model::apply_chat_template(*chat_template, {{"user", a.prompt}}, true);
  engine::GenerateRequest req;
  req.prompt_ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  req.sampling = sampling_params(a.sampling);
  req.stop.max_new_tokens = a.n_predict;
  req.stop.ignore_eos = a.ignore_eos;
  KILN_CHECK(static_cast<int64_t>(req.prompt_ids.size()) + a.n_predict <= rt.info().context_length,
             "prompt of {} tokens plus {} new tokens exceeds the context of {}",
             req.prompt_ids.size(), a.n_predict, rt.info().context_length);

  engine::EngineConfig cfg;
  cfg.speculative = speculative;
  engine::Engine eng(rt.executor(), rt.kv_pool(), tok, cfg, draft_resources);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  engine::RequestEvent last;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  clock::time_point t_first{};
  eng.submit(req, [&](const engine::RequestEvent& ev) {
    if (!ev.new_tokens.empty() && t_first == clock::time_point{}) t_first = clock::now();
    std::fwrite(ev.text_delta.data(), 1, ev.text_delta.size(), stdout);
    std::fflush(stdout);
    if (ev.finished) {
      std::lock_guard<std::mutex> lock(mu);
      last = ev;
      done = true;
      cv.notify_all();
    }
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  auto t_end = clock::now();
  KILN_CHECK(last.error.empty(), "generation failed: {}", last.error);
  if (t_first == clock::time_point{}) t_first = t_end;
  double prefill_s = std::chrono::duration<double>(t_first - t0).count();
  double decode_s = std::chrono::duration<double>(t_end - t_first).count();
  int decoded = std::max(0, last.completion_tokens - 1);  // the first token comes with the prefill
  // End the text's line on stdout before the summary goes to stderr: with stdout a pipe the
  // newline would otherwise sit in its buffer and the summary land glued to the last word.
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr,
               "prompt: %d tokens, %.1f tok/s | generated: %d tokens, %.1f tok/s | ttft %.3f s | "
               "finish: %s\n",
               last.prompt_tokens, last.prompt_tokens / std::max(prefill_s, 1e-9),
               last.completion_tokens, decoded / std::max(decode_s, 1e-9), prefill_s,
               engine::finish_reason_name(last.finish_reason));
  if (last.spec_verify_ct >= 0) {
    // SGLang's accept length: completion tokens per decode step of the request.
    std::fprintf(stderr,
                 "speculative: %d decode steps, %.2f tokens per step | proposed %d, accepted %d "
                 "(%.0f%%)\n",
                 last.spec_verify_ct,
                 last.completion_tokens / static_cast<double>(std::max(1, last.spec_verify_ct)),
                 last.spec_proposed, last.spec_accepted,
                 100.0 * last.spec_accepted / std::max(1, last.spec_proposed));
  }
  if (group != nullptr) {
    std::fprintf(stderr, "tensor parallel: %d ranks; rank 0: %s\n", group->size(),
                 rt.tp_summary().c_str());
  }
  if (const engine::GraphChecker* checker = rt.graph_checker()) {
    std::fprintf(stderr,
                 "check-graph: %lld graph steps checked against eager mode, %lld diverged\n",
                 static_cast<long long>(checker->steps_checked()),
                 static_cast<long long>(checker->steps_failed()));
    if (checker->steps_failed() > 0) return 3;
  }
  return 0;
}

int run(const RunArgs& a) {
  set_log_level(a.local.log_level);
  std::unique_ptr<Communicator> group = open_tp_group(a.tp);
  return run_tp_guarded(group.get(), [&] { return run_on_rank(a, group.get()); });
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text for one prompt");
  add_local_model_flags(cmd, args->local);
  add_speculative_flags(cmd, args->speculative);
  add_sampling_flags(cmd, args->sampling);
  cmd->add_option("-p,--prompt", args->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens to generate")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Keep generating past end-of-sequence");
  cmd->add_flag("--chat", args->chat, "Wrap the prompt in the model's chat template");
  add_tp_options(cmd, args->tp);
  cmd->callback([args] { std::exit(run(*args)); });
}

}  // namespace kiln::cli
