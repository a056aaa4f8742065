// `kiln perplexity`: perplexity of a model on a text file by llama-perplexity's method, so
// the two figures compare on the same file and context size. The text is tokenized whole
// (with BOS when the model adds one), cut into windows of --ctx-size tokens; each window runs
// from an empty KV cache with its first token replaced by BOS, and only its second half is
// scored (every scored token then sees at least ctx/2 tokens of context). Rows are scored
// from full logits rows in chunks, through the same prefill path as serving.
//
// --kl-divergence-base FILE saves the base's top log-probabilities per scored position;
// --kl-divergence FILE compares this run (another model file, quantization or graph mode)
// against them: KL divergence, top-1 agreement and both perplexities.
//
// Under --tp (mpirun -np N kiln perplexity ... --tp N) rank 0 scores and prints; the full
// logits rows come from the LM head's vocabulary all-gather (docs/tensor-parallel.md).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/runtime.h"
#include "kiln/engine/sequence_stepper.h"
#include "kiln/kernels/kv_cache.h"
#include "kiln/model/tokenizer.h"
#include "perplexity_scoring.h"
#include "progress_bar.h"
#include "tp_group.h"

namespace kiln::cli {
namespace {

struct PerplexityArgs {
  std::string model;
  std::string quantize;          // --quantize
  std::string kv_dtype = "f16";  // --kv-dtype
  std::string file;
  int ctx_size = 512;
  int chunks = -1;
  std::string kld_base_out;
  std::string kld_base_in;
  int kld_top_k = 64;
  std::string graph_mode = "optimize";
  int threads = 0;
  std::string log_level = "warn";
  std::string dump_tokens;
  TpArgs tp;
};

// Rows scored per step: each returns a full logits row.
constexpr int kScoreRowsPerStep = 32;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "cannot open '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int perplexity_on_rank(const PerplexityArgs& a, Communicator* group) {
  KILN_CHECK(a.ctx_size >= 4, "--ctx-size must be at least 4, got {}", a.ctx_size);
  KILN_CHECK(a.chunks == -1 || a.chunks >= 1, "--chunks must be at least 1, got {}", a.chunks);
  KILN_CHECK(a.kld_base_out.empty() || a.kld_base_in.empty(),
             "--kl-divergence-base and --kl-divergence are exclusive: make the base file first");
  const std::string text = read_text(a.file);

  engine::RuntimeOptions opts;
  opts.model_path = model_or_default(a.model);
  opts.quantize = a.quantize;
  opts.kv_dtype = kernels::parse_kv_dtype(a.kv_dtype);
  opts.threads = a.threads;
  opts.graph_mode = engine::parse_graph_mode(a.graph_mode);
  opts.max_graph_bs = 1;
  opts.kv_tokens = a.ctx_size + 64;
  opts.context_length = a.ctx_size;
  opts.tp = group;
  const bool leader = group == nullptr || group->rank() == 0;
  ProgressBar bar;
  if (leader) {
    opts.progress = [&bar](const char* stage, int64_t done, int64_t total) {
      bar.update(stage, done, total);
    };
  }
  engine::Runtime rt(opts);
  if (!leader) {  // runs the steps rank 0 broadcasts
    rt.run_tp_follower();
    return 0;
  }
  KILN_CHECK(rt.info().context_length >= a.ctx_size,
             "--ctx-size {} exceeds the model's context length {}", a.ctx_size,
             rt.info().context_length);
  const model::Tokenizer& tok = rt.tokenizer();
  std::vector<int32_t> tokens = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  const int64_t n_ctx = a.ctx_size;
  KILN_CHECK(static_cast<int64_t>(tokens.size()) >= 2 * n_ctx,
             "'{}' tokenizes to {} tokens; a context of {} needs at least {}", a.file,
             tokens.size(), n_ctx, 2 * n_ctx);
  const int64_t max_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  const int64_t n_chunks = a.chunks < 0 ? max_chunks : std::min<int64_t>(a.chunks, max_chunks);
  const int64_t vocab = rt.info().vocab_size;
  const int64_t first = n_ctx / 2;

  KldHeader header;
  header.n_ctx = static_cast<int32_t>(n_ctx);
  header.n_chunks = static_cast<int32_t>(n_chunks);
  header.top_k = a.kld_top_k;
  header.vocab = static_cast<int32_t>(vocab);
  header.tokens.assign(tokens.begin(), tokens.begin() + n_chunks * n_ctx);
  if (!a.dump_tokens.empty()) {
    std::ofstream out(a.dump_tokens);
    for (int32_t t : header.tokens) out << t << '\n';
    KILN_CHECK(out.good(), "writing '{}' failed", a.dump_tokens);
  }
  std::optional<KldBaseWriter> base_out;
  std::optional<KldComparer> compare;
  if (!a.kld_base_out.empty()) base_out.emplace(a.kld_base_out, header);
  if (!a.kld_base_in.empty()) compare.emplace(a.kld_base_in, header);

  std::fprintf(stderr,
               "perplexity: %zu tokens, %lld chunks of %lld, scoring the last %lld tokens of "
               "each\n",
               tokens.size(), static_cast<long long>(n_chunks), static_cast<long long>(n_ctx),
               static_cast<long long>(n_ctx - first - 1));
  engine::SequenceStepper stepper(rt.executor(), rt.kv_pool());
  NllAccumulator nll;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> window(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
    if (tok.add_bos() && tok.bos() >= 0) window[0] = tok.bos();
    engine::SteppedSequence seq;
    // Rows [0, first) only fill the cache; rows [first, n_ctx - 1) each predict the next token
    // (the last token is only ever predicted, so it never runs).
    stepper.step({&seq}, {std::vector<int32_t>(window.begin(), window.begin() + first)});
    for (int64_t r = first; r < n_ctx - 1; r += kScoreRowsPerStep) {
      const int64_t end = std::min<int64_t>(r + kScoreRowsPerStep, n_ctx - 1);
      const std::vector<float> rows = stepper.step_all_rows(
          seq, std::vector<int32_t>(window.begin() + r, window.begin() + end));
      for (int64_t j = r; j < end; ++j) {
        const float* row = rows.data() + (j - r) * vocab;
        const int32_t next = window[static_cast<size_t>(j + 1)];
        nll.add(row[next] - log_sum_exp(row, vocab));
        if (base_out) base_out->add(row, next);
        if (compare) compare->add(row, next);
      }
    }
    stepper.release(seq);
    std::fprintf(stdout, "[%lld]%.4f,", static_cast<long long>(c + 1), nll.ppl());
    std::fflush(stdout);
    if (c == 0) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "perplexity: %.2f seconds per chunk, ETA %.1f minutes\n", s,
                   s * static_cast<double>(n_chunks) / 60.0);
    }
  }
  rt.tp_shutdown();
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", nll.ppl(), nll.ppl_error());
  if (base_out) base_out->close();
  if (compare) compare->print();
  std::printf(
      "{\"ppl\": %.6f, \"ppl_error\": %.6f, \"tokens_scored\": %lld, \"chunks\": %lld, "
      "\"ctx_size\": %lld}\n",
      nll.ppl(), nll.ppl_error(), static_cast<long long>(nll.count()),
      static_cast<long long>(n_chunks), static_cast<long long>(n_ctx));
  return 0;
}

int run_perplexity(const PerplexityArgs& a) {
  set_log_level(a.log_level);
  std::unique_ptr<Communicator> group = open_tp_group(a.tp);
  return run_tp_guarded(group.get(), [&] { return perplexity_on_rank(a, group.get()); });
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto args = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a text file (llama-perplexity's method), and KL divergence");
  add_model_options(cmd, args->model, &args->quantize);
  add_kv_dtype_option(cmd, args->kv_dtype);
  cmd->add_option("-f,--file", args->file, "Text file to score")->required();
  cmd->add_option("-c,--ctx-size", args->ctx_size, "Tokens per window (default 512)");
  cmd->add_option("--chunks", args->chunks, "Score only the first N windows (default: all)");
  cmd->add_option("--kl-divergence-base", args->kld_base_out,
                  "Save this run's top log-probabilities per scored token to FILE");
  cmd->add_option("--kl-divergence", args->kld_base_in,
                  "Compare this run against a base FILE: KL divergence, top-1 agreement");
  cmd->add_option("--kl-top-k", args->kld_top_k,
                  "Log-probabilities saved per token in the base file (default 64)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--dump-tokens", args->dump_tokens,
                  "Write the scored token stream to FILE, one id per line");
  cmd->add_option("--graph-mode", args->graph_mode, "off | replay | optimize");
  cmd->add_option("-t,--threads", args->threads, "Threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--log-level", args->log_level, "trace|debug|info|warn|error|off");
  add_tp_options(cmd, args->tp);
  cmd->callback([args] { std::exit(run_perplexity(*args)); });
}

}  // namespace kiln::cli
