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
#include "kiln/engine/graph_checker.h"
#include "kiln/engine/runtime.h"
#include "kiln/kernels/kv_cache.h"
#include "kiln/model/chat_template.h"
#include "kiln/model/model_files.h"
#include "kiln/model/tokenizer.h"
#include "progress_bar.h"
#include "tp_group.h"

namespace kiln::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string quantize;          // --quantize
  std::string kv_dtype = "f16";  // --kv-dtype
  std::string prompt;
  int n_predict = 128;
  double temperature = 0.0;
  int top_k = -1;
  double top_p = 1.0;
  double min_p = 0.0;
  int64_t seed = -1;
  int threads = 0;
  bool ignore_eos = false;
  bool chat = false;
  std::string graph_mode = "optimize";
  int max_graph_bs = 32;
  int ctx_size = 0;
  std::string log_level = "warn";
  bool check_graph = false;
  bool no_compile_cache = false;
  double cache_max_gb = 8.0;  // --cache-max-gb
  TpArgs tp;
};

int run_on_rank(const RunArgs& a, Communicator* group) {
  // Decided before the weights load: a model whose chat template kiln cannot render fails at
  // once, with the reason, instead of after minutes of loading.
  std::optional<model::ChatTemplate> chat_template;
  if (a.chat) {
    chat_template =
        model::detect_chat_template(model::read_chat_template(model_or_default(a.model)));
  }
  ProgressBar bar;
  engine::RuntimeOptions opts;
  opts.model_path = model_or_default(a.model);
  opts.quantize = a.quantize;
  opts.kv_dtype = kernels::parse_kv_dtype(a.kv_dtype);
  opts.threads = a.threads;
  opts.graph_mode = engine::parse_graph_mode(a.graph_mode);
  opts.max_graph_bs = a.max_graph_bs;
  opts.context_length = a.ctx_size;
  opts.check_graph = a.check_graph;
  opts.compile_cache = !a.no_compile_cache;
  opts.cache_max_bytes = static_cast<uint64_t>(a.cache_max_gb * 1073741824.0);
  opts.tp = group;
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
  const model::Tokenizer& tok = rt.tokenizer();

  std::string text = a.prompt;
  if (chat_template) text = model::apply_chat_template(*chat_template, {{"user", a.prompt}}, true);
  engine::GenerateRequest req;
  req.prompt_ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  req.sampling.temperature = a.temperature;
  req.sampling.top_k = a.top_k;
  req.sampling.top_p = a.top_p;
  req.sampling.min_p = a.min_p;
  if (a.seed >= 0) req.sampling.seed = static_cast<uint64_t>(a.seed);
  req.stop.max_new_tokens = a.n_predict;
  req.stop.ignore_eos = a.ignore_eos;
  KILN_CHECK(static_cast<int64_t>(req.prompt_ids.size()) + a.n_predict <= rt.info().context_length,
             "prompt of {} tokens plus {} new tokens exceeds the context of {}",
             req.prompt_ids.size(), a.n_predict, rt.info().context_length);

  engine::EngineConfig cfg;
  engine::Engine eng(rt.executor(), rt.kv_pool(), tok, cfg);
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
  set_log_level(a.log_level);
  std::unique_ptr<Communicator> group = open_tp_group(a.tp);
  return run_tp_guarded(group.get(), [&] { return run_on_rank(a, group.get()); });
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text for one prompt");
  add_model_options(cmd, args->model, &args->quantize);
  add_kv_dtype_option(cmd, args->kv_dtype);
  cmd->add_option("-p,--prompt", args->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", args->n_predict, "Tokens to generate")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temp", args->temperature, "Sampling temperature (0: greedy)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", args->top_k, "Top-k (-1: off)");
  cmd->add_option("--top-p", args->top_p, "Top-p")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", args->min_p, "Min-p")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", args->seed, "Sampling seed");
  cmd->add_option("-t,--threads", args->threads, "Threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Keep generating past end-of-sequence");
  cmd->add_flag("--chat", args->chat, "Wrap the prompt in the model's chat template");
  cmd->add_option("--graph-mode", args->graph_mode, "off | replay | optimize");
  cmd->add_option("--max-graph-bs", args->max_graph_bs, "Largest captured decode batch")
      ->check(CLI::Range(1, 512));
  cmd->add_option("-c,--ctx-size", args->ctx_size,
                  "Context length (default: the model's, capped by the KV pool)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_flag("--no-compile-cache", args->no_compile_cache,
                "Neither read nor write the compile cache and the packed-weight cache");
  cmd->add_option("--cache-max-gb", args->cache_max_gb,
                  "After loading, remove the least recently used cache entries (compiled plans, "
                  "packed weights) until the cache folder holds at most this many GiB; this run's "
                  "entries are always kept (0: no bound)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--check-graph", args->check_graph,
                "Check every graph-mode decode step against eager mode, node by node (slow)");
  cmd->add_option("--log-level", args->log_level, "trace|debug|info|warn|error|off");
  add_tp_options(cmd, args->tp);
  cmd->callback([args] { std::exit(run(*args)); });
}

}  // namespace kiln::cli
