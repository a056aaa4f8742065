// `kiln serve`: load a model, start the engine and serve the SGLang-native and OpenAI HTTP APIs
// until SIGINT/SIGTERM. Shutdown drains: the listening socket closes, idle and slow connections
// close, streams end at once with a final "abort" event (their client has every token so far),
// and non-streaming requests in flight may finish for up to --shutdown-timeout seconds (their
// client would otherwise get nothing); then the engine aborts what is left, the last events go
// out, and the process exits with status 0. A second signal exits at once.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/engine.h"
#include "kiln/engine/runtime.h"
#include "kiln/engine/tokenizer_text.h"
#include "kiln/kernels/kv_cache.h"
#include "kiln/model/sentence_encoder.h"
#include "kiln/server/api_key.h"
#include "kiln/server/engine_backend.h"
#include "kiln/server/engine_embedding_backend.h"
#include "kiln/server/http_server.h"
#include "kiln/server/sentence_encoder_backend.h"
#include "kiln/server/tokenizer_codec.h"
#include "progress_bar.h"
#include "speculative_flags.h"
#include "tp_group.h"

namespace kiln::cli {
namespace {

struct ServeArgs {
  SpeculativeFlags speculative;
  std::string model;
  std::string quantize;          // --quantize
  std::string kv_dtype = "f16";  // --kv-dtype
  std::string served_model_name;
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string api_key;
  std::string api_key_file;  // the key's first line; keeps it out of `ps` and shell history
  std::string cors_allow_origin;
  bool no_webui = false;  // --no-webui: no chat page at `/`
  // The flags that are plain fields of the library's options are bound to them directly, so
  // their defaults are the library's (the rest are read into these after parsing).
  engine::RuntimeOptions runtime;
  engine::EngineConfig engine;
  std::string graph_mode = "optimize";
  std::string mixed_steps = "on";
  std::string schedule_policy = engine::schedule_policy_name(engine::ScheduleConfig{}.policy);
  bool disable_prefix_cache = false;
  std::string embeddings;  // --embeddings last|mean: serve /v1/embeddings from hidden states
  std::string encoder_precision = "bf16";  // embedding folders' matrix arithmetic
  bool no_compile_cache = false;
  double cache_max_gb = 8.0;  // --cache-max-gb
  int64_t random_seed = -1;
  size_t max_body_bytes = 16u << 20;
  int64_t max_prompt_tokens = 0;
  double shutdown_timeout = 30;
  std::string log_level = "info";
  TpArgs tp;
};

// SIGINT/SIGTERM are blocked in every thread (set before any thread starts, so all inherit it)
// and taken by one thread with sigwait: shutdown then runs as ordinary code, not in a handler.
class ShutdownSignal {
 public:
  ShutdownSignal() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    std::thread([this] {
      int sig = 0;
      sigwait(&set_, &sig);
      if (!ready_.load()) {
        std::fprintf(stderr, "\nkiln serve: interrupted while loading\n");
        std::_Exit(130);
      }
      received_.set_value(sig);
      // The operator who signals again does not want to wait for the drain.
      sigwait(&set_, &sig);
      std::fprintf(stderr, "\nkiln serve: second signal, exiting without draining\n");
      std::_Exit(128 + sig);
    }).detach();  // blocked in sigwait for the life of the process when no signal comes
  }
  void set_ready() { ready_ = true; }
  int wait() { return received_.get_future().get(); }

 private:
  sigset_t set_;
  std::atomic<bool> ready_{false};
  std::promise<int> received_;
};

// Never the key itself: /get_server_info is readable by every client that has the key, and
// the startup log goes wherever the operator sends it.
nlohmann::json server_args_json(const ServeArgs& a, const engine::ModelInfo& info,
                                bool api_key_set) {
  return {{"model_path", info.path},
          {"served_model_name", a.served_model_name.empty() ? info.name : a.served_model_name},
          {"host", a.host},
          {"port", a.port},
          {"threads", a.runtime.threads},
          {"graph_mode", a.graph_mode},
          {"max_graph_bs", a.runtime.max_graph_bs},
          {"max_running_requests", a.engine.max_running_requests},
          {"max_queued_requests", a.engine.max_queued_requests},
          {"kv_tokens", a.runtime.kv_tokens},
          {"kv_dtype", a.kv_dtype},
          {"page_size", a.runtime.page_size},
          {"chunked_prefill_size", a.engine.chunked_prefill_size},
          {"max_prefill_tokens_while_decoding", a.engine.max_prefill_tokens_while_decoding},
          {"mixed_steps", a.mixed_steps == "on"},
          {"schedule_policy", a.schedule_policy},
          {"context_length", info.context_length},
          {"enable_prefix_cache", !a.disable_prefix_cache},
          {"api_key_set", api_key_set},
          {"cors_allow_origin", a.cors_allow_origin},
          {"webui", !a.no_webui},
          {"tp_size", a.tp.tp},
          {"dp_size", 1}};
}

// An embedding model (a BERT encoder folder): no engine, no KV cache; /v1/embeddings and
// /encode run on the encoder, generation routes are refused (sentence_encoder_backend.h).
int serve_encoder(const ServeArgs& a, ShutdownSignal& signal, const std::string& path,
                  const std::string& api_key) {
  const model::SentenceEncoder encoder(path,
                                       model::encoder_precision_from_name(a.encoder_precision));
  const int threads = a.runtime.threads > 0
                          ? a.runtime.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string name = std::filesystem::path(path).filename().string();
  server::ModelCard card;
  card.id = a.served_model_name.empty() ? name : a.served_model_name;
  card.path = path;
  card.architecture = "bert";
  card.is_generation = false;
  card.context_length = static_cast<int64_t>(encoder.max_tokens());
  card.vocab_size = encoder.config().vocab_size;
  server::SentenceEncoderBackend embeddings(encoder, threads);
  server::EncoderOnlyGeneration generation(card.id);
  server::EncoderTextCodec codec(encoder, card.id);
  server::ServerOptions sopts;
  sopts.host = a.host;
  sopts.port = a.port;
  sopts.api_key = api_key;
  sopts.cors_allow_origin = a.cors_allow_origin;
  sopts.max_body_bytes = a.max_body_bytes;
  sopts.server_args = {{"model_path", path},
                       {"served_model_name", card.id},
                       {"host", a.host},
                       {"port", a.port},
                       {"threads", threads},
                       {"is_embedding", true},
                       {"api_key_set", !api_key.empty()}};
  server::HttpServer http(generation, codec, card, sopts);
  http.state().embeddings = &embeddings;
  const int port = http.bind();
  std::thread http_thread([&] { http.serve(); });
  signal.set_ready();
  std::printf(
      "kiln: serving embedding model %s (%lld dimensions, %zu tokens at most) at "
      "http://%s:%d/v1/embeddings\n",
      card.id.c_str(), static_cast<long long>(encoder.dim()), encoder.max_tokens(), a.host.c_str(),
      port);
  std::fflush(stdout);
  signal.wait();
  http.stop_accepting();
  http.wait_requests_done(
      std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout * 1000)));
  http.stop();
  http_thread.join();
  KILN_LOG_INFO("stopped");
  return 0;
}

int serve_on_rank(const ServeArgs& a, ShutdownSignal& signal, Communicator* group) {
  // Before the model loads, so a wrong path fails at once.
  const std::string api_key =
      a.api_key_file.empty() ? a.api_key : server::read_api_key_file(a.api_key_file);
  if (group == nullptr && !a.model.empty()) {
    const std::string path = resolve_model_name(a.model);
    if (model::SentenceEncoder::is_encoder_model(path))
      return serve_encoder(a, signal, path, api_key);
  }
  engine::SpeculativeConfig speculative = speculative_config(a.speculative);

  ProgressBar bar;
  engine::RuntimeOptions opts = a.runtime;
  opts.tp = group;
  opts.model_path = model_or_default(a.model);
  opts.quantize = a.quantize;
  opts.kv_dtype = kernels::parse_kv_dtype(a.kv_dtype);
  opts.graph_mode = engine::parse_graph_mode(a.graph_mode);
  opts.compile_cache = !a.no_compile_cache;
  opts.cache_max_bytes = static_cast<uint64_t>(a.cache_max_gb * 1073741824.0);
  add_verify_plans(a.speculative, opts);
  opts.progress = [&](const char* stage, int64_t done, int64_t total) {
    bar.update(stage, done, total);
  };
  engine::Runtime rt(opts);
  const engine::ModelInfo& info = rt.info();
  if (rt.tp_rank() > 0) {
    // A follower serves nothing itself: it runs rank 0's steps until rank 0 shuts down (a
    // signal mpirun forwards here is left to rank 0, which drains and then says stop).
    signal.set_ready();
    const int64_t steps = rt.run_tp_follower();
    KILN_LOG_INFO("tensor parallel rank {}: stopped after {} steps", rt.tp_rank(), steps);
    return 0;
  }
  engine::SpeculativeResources draft_resources;
  const std::unique_ptr<engine::Runtime> draft =
      load_draft_model(a.speculative, opts, rt, draft_resources);

  engine::EngineConfig cfg = a.engine;
  cfg.mixed_steps = a.mixed_steps == "on";
  cfg.schedule.policy = engine::parse_schedule_policy(a.schedule_policy);
  cfg.speculative = speculative;
  cfg.enable_prefix_cache = !a.disable_prefix_cache;
  if (a.random_seed >= 0) cfg.random_seed = static_cast<uint64_t>(a.random_seed);
  engine::TokenizerText text_view(rt.tokenizer());
  engine::Engine eng(rt.executor(), rt.kv_pool(), text_view, cfg, draft_resources);
  server::EngineBackend backend(eng);
  server::ChatSupport chat = server::ChatSupport::from_template(info.chat_template);
  if (chat.chat_template) {
    KILN_LOG_INFO("chat format: {}", model::chat_template_name(chat.chat_template->kind));
  } else {
    KILN_LOG_WARN("chat requests will be refused: {}", chat.unavailable_reason);
  }
  server::TokenizerCodec codec(rt.tokenizer(), std::move(chat));

  server::ModelCard card;
  card.id = a.served_model_name.empty() ? info.name : a.served_model_name;
  card.path = info.path;
  card.architecture = info.architecture;
  card.context_length = info.context_length;
  card.vocab_size = info.vocab_size;
  card.n_params = info.n_params;
  server::ServerOptions sopts;
  sopts.host = a.host;
  sopts.port = a.port;
  sopts.api_key = api_key;
  sopts.cors_allow_origin = a.cors_allow_origin;
  sopts.webui = !a.no_webui;
  sopts.max_request_sequences = a.engine.max_queued_requests;
  sopts.max_body_bytes = a.max_body_bytes;
  sopts.max_prompt_tokens = a.max_prompt_tokens;
  sopts.server_args = server_args_json(a, info, !api_key.empty());
  server::HttpServer http(backend, codec, card, sopts);
  std::unique_ptr<server::EngineEmbeddingBackend> embeddings;
  if (!a.embeddings.empty()) {
    KILN_CHECK(a.embeddings == "last" || a.embeddings == "mean",
               "--embeddings must be last or mean, not '{}'", a.embeddings);
    KILN_CHECK(group == nullptr, "--embeddings is not supported with tensor parallel");
    embeddings = std::make_unique<server::EngineEmbeddingBackend>(
        eng, codec, info.n_embd, info.context_length, a.embeddings == "mean");
    http.state().embeddings = embeddings.get();
  }
  const int port = http.bind();
  std::thread http_thread([&] { http.serve(); });
  signal.set_ready();

  const std::string url = fmt::format("http://{}:{}", a.host, port);
  std::printf("kiln: serving %s (%s, context %lld, graph mode %s) at %s\n", card.id.c_str(),
              info.architecture.c_str(), static_cast<long long>(info.context_length),
              a.graph_mode.c_str(), url.c_str());
  if (!a.no_webui) std::printf("  chat in the browser: %s/\n", url.c_str());
  std::printf(
      "  try: curl %s/generate -H 'Content-Type: application/json'%s -d "
      "'{\"text\": \"The capital of France is\", \"sampling_params\": "
      "{\"max_new_tokens\": 16, \"temperature\": 0}}'\n",
      url.c_str(), api_key.empty() ? "" : " -H 'Authorization: Bearer $KILN_API_KEY'");
  std::fflush(stdout);

  int sig = signal.wait();
  KILN_LOG_INFO("received {}, draining for up to {} s (a second signal exits at once)",
                sig == SIGINT ? "SIGINT" : "SIGTERM", a.shutdown_timeout);
  http.stop_accepting();  // and streams end with "abort"
  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout * 1000));
  if (!http.wait_requests_done(grace)) {
    KILN_LOG_WARN("{} requests still running after {} s; aborting them", http.requests_in_flight(),
                  a.shutdown_timeout);
  }
  eng.shutdown();  // every request still in flight finishes with "abort"
  if (!http.wait_idle(std::chrono::seconds(10))) {
    KILN_LOG_WARN("some responses were still being written after 10 s; closing them");
  }
  http.stop();
  http_thread.join();
  rt.tp_shutdown();  // the follower ranks leave their loop
  KILN_LOG_INFO("stopped");
  return 0;
}

int serve(const ServeArgs& a) {
  set_log_level(a.log_level);
  ShutdownSignal signal;  // first: every thread started later (MPI's too) inherits the mask
  std::unique_ptr<Communicator> group = open_tp_group(a.tp);
  return run_tp_guarded(group.get(), [&] { return serve_on_rank(a, signal, group.get()); });
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd =
      app.add_subcommand("serve", "Serve a model over HTTP (SGLang-native + OpenAI APIs)");
  add_model_options(cmd, a->model, &a->quantize);
  add_kv_dtype_option(cmd, a->kv_dtype);
  cmd->add_option("--served-model-name", a->served_model_name,
                  "Model name in API responses (default: the GGUF's general.name)");
  cmd->add_option("--host", a->host, "Address to bind")->capture_default_str();
  cmd->add_option("--port", a->port, "Port (0: any free port, printed at startup)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  auto* key = cmd->add_option("--api-key", a->api_key,
                              "Require 'Authorization: Bearer KEY' on every route but /health "
                              "and the chat page's files (the page asks for the key)");
  cmd->add_option("--api-key-file", a->api_key_file,
                  "Read the API key from the first line of this file (not shown by ps)")
      ->excludes(key);
  cmd->add_option("--cors-allow-origin", a->cors_allow_origin,
                  "Send Access-Control-Allow-Origin with this value ('*' or an origin) so "
                  "browser pages may read responses (default: off; preflights are always "
                  "answered)");
  cmd->add_flag("--no-webui", a->no_webui,
                "Do not serve the chat page at / (docs/webui.md); / then answers 404");
  cmd->add_option("-t,--threads", a->runtime.threads, "Compute threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--graph-mode", a->graph_mode, "off | replay | optimize")
      ->check(CLI::IsMember({"off", "replay", "optimize"}))
      ->capture_default_str();
  cmd->add_option("--max-graph-bs", a->runtime.max_graph_bs, "Largest captured decode batch")
      ->check(CLI::Range(1, 512))
      ->capture_default_str();
  cmd->add_option("--max-running-requests", a->engine.max_running_requests, "Decode batch cap")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-queued-requests", a->engine.max_queued_requests,
                  "Waiting requests before new ones get 503")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--kv-tokens", a->runtime.kv_tokens, "KV pool capacity in tokens (0: automatic)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--page-size", a->runtime.page_size, "Tokens per KV page")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--max-prefill-tokens-while-decoding",
                  a->engine.max_prefill_tokens_while_decoding,
                  "Prompt tokens per prefill step while requests are decoding (0: no cap): "
                  "bounds the inter-token latency that arriving prompts add")
      ->check(CLI::Range(0, 1 << 20));
  add_speculative_flags(cmd, a->speculative);
  cmd->add_option("--mixed-steps", a->mixed_steps,
                  "on: decoding requests get their token in the same step as a prefill chunk; "
                  "off: prefill and decode steps alternate")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--schedule-policy", a->schedule_policy,
                  fmt::format("Order of waiting requests: fcfs (arrival) or lpm (longest cached "
                              "prompt prefix first). Either way a request's `priority` comes "
                              "first, and no request waits while more than {} newer ones are "
                              "admitted",
                              engine::ScheduleConfig{}.max_times_overtaken))
      ->check(CLI::Validator(
          [](const std::string& v) {
            try {
              engine::parse_schedule_policy(v);
              return std::string();
            } catch (const Error& e) {
              return std::string(e.what());
            }
          },
          "lpm|fcfs"))
      ->capture_default_str();
  cmd->add_option("--chunked-prefill-size", a->engine.chunked_prefill_size,
                  "Prompt tokens per prefill chunk")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--context-length", a->runtime.context_length,
                  "Context length (0: the model's, capped by --kv-tokens)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-compile-cache", a->no_compile_cache,
                "Neither read nor write the compile cache and the packed-weight cache");
  cmd->add_option("--cache-max-gb", a->cache_max_gb,
                  "After loading, remove the least recently used cache entries (compiled plans, "
                  "packed weights) until the cache folder holds at most this many GiB; this run's "
                  "entries are always kept (0: no bound)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--embeddings", a->embeddings,
                  "last | mean: also serve /v1/embeddings and /encode from this generative "
                  "model's final hidden state (for models trained to embed; docs/embeddings.md)");
  cmd->add_option("--encoder-precision", a->encoder_precision,
                  "bf16 | f32: an embedding folder's matrix arithmetic (default bf16, twice as "
                  "fast, a cosine of ~3e-5 from f32: docs/embeddings.md)")
      ->capture_default_str();
  cmd->add_flag("--disable-prefix-cache", a->disable_prefix_cache,
                "Turn off the radix prefix cache");
  cmd->add_option("--random-seed", a->random_seed,
                  "Seed for requests that give none (default: random)");
  cmd->add_option("--max-body-bytes", a->max_body_bytes, "Larger request bodies get 413")
      ->capture_default_str();
  cmd->add_option("--max-prompt-tokens", a->max_prompt_tokens,
                  "Longer prompts get 400 (0: only the context length limits them)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--shutdown-timeout", a->shutdown_timeout,
                  "On SIGTERM/SIGINT, seconds that non-streaming requests in flight may take to "
                  "finish before they are aborted (streams end at once)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--log-level", a->log_level, "trace|debug|info|warn|error|off")
      ->capture_default_str();
  add_tp_options(cmd, a->tp);
  cmd->callback([a] { std::exit(serve(*a)); });
}

}  // namespace kiln::cli
