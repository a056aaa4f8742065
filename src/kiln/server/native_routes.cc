#include "kiln/server/native_routes.h"

#include <fmt/format.h>

#include "kiln/server/client_watch.h"
#include "kiln/server/generation_job.h"
#include "kiln/server/http_error.h"
#include "kiln/server/json_fields.h"
#include "kiln/server/native_request_parser.h"
#include "kiln/server/native_responses.h"
#include "kiln/server/request_builder.h"
#include "kiln/server/sse_stream.h"

namespace kiln::server {

namespace {

using nlohmann::json;

std::string prompt_field(const NativeGenerateRequest& r, size_t i) {
  const char* name = r.prompts[i].is_text ? "text" : "input_ids";
  return r.is_batch ? fmt::format("{}[{}]", name, i) : std::string(name);
}

// One engine request per (prompt, sample), prompt-major: output k is prompt k / n, sample k % n.
std::vector<engine::GenerateRequest> build_requests(const NativeGenerateRequest& r,
                                                    const ServerState& state) {
  if (r.prompts.size() > static_cast<size_t>(state.options.max_batch_prompts)) {
    bad_field(r.prompts[0].is_text ? "text" : "input_ids", "has {} prompts, more than {}",
              r.prompts.size(), state.options.max_batch_prompts);
  }
  int64_t sequences = 0;
  for (const auto& o : r.options) sequences += o.n;
  check_sequence_count(sequences, state.options.max_request_sequences, "sampling_params.n");
  std::vector<engine::GenerateRequest> out;
  const int logprobs = r.return_logprob ? r.top_logprobs_num : -1;
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    auto ids =
        tokenize_prompt(r.prompts[i], state.codec, state.prompt_limits(), prompt_field(r, i));
    for (int j = 0; j < r.options[i].n; ++j) {
      out.push_back(make_engine_request(ids, r.options[i], j, logprobs, state.prompt_limits(),
                                        prompt_field(r, i)));
      if (r.return_logprob && r.logprob_start_len >= 0) {
        if (static_cast<size_t>(r.logprob_start_len) > ids.size()) {
          bad_field("logprob_start_len", "({}) is past the end of the prompt ({} tokens)",
                    r.logprob_start_len, ids.size());
        }
        out.back().prompt_logprobs_from = r.logprob_start_len;
      }
    }
  }
  return out;
}

bool returns_list(const NativeGenerateRequest& r) { return r.is_batch || r.options[0].n > 1; }

// A request the engine failed (not a client abort or shutdown) is a server error.
void throw_if_engine_failed(const GenerationJob& job) {
  for (size_t i = 0; i < job.size(); ++i) {
    if (!job.result(i).error.empty()) throw HttpError(500, job.result(i).error);
  }
}

void handle_generate(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  auto parsed = parse_native_generate(parse_json_body(req), state.parse_limits());
  auto job = std::make_shared<GenerationJob>(state.backend, state.metrics, "/generate");
  job->start(build_requests(parsed, state));
  const bool list = returns_list(parsed);
  if (!parsed.stream) {
    ActiveGeneration active(state);
    job->wait_all(ClientWatch::client_gone);
    throw_if_engine_failed(*job);
    json out = json::array();
    for (size_t i = 0; i < job->size(); ++i) {
      out.push_back(native_output(job->result(i), parsed, state.codec));
    }
    set_json(res, list ? out : out[0]);
    return;
  }
  SseRenderer renderer;
  renderer.on_update = [&state, parsed, list](const GenerationJob& j,
                                              const GenerationJob::Update& u) {
    const auto& e = u.event;
    if (e.new_tokens.empty() && e.text_delta.empty() && !e.finished) return std::vector<json>{};
    json out = native_output(j.result(u.index), parsed, state.codec);
    if (list) out["index"] = u.index;
    return std::vector<json>{std::move(out)};
  };
  stream_job(res, std::move(job), state, std::move(renderer));
}

void handle_health_generate(ServerState& state, HttpResponse& res) {
  // One greedy token from the first token of an empty prompt (BOS): proves the scheduler and
  // the model run, which /health (process alive) does not.
  std::vector<int32_t> prompt = state.codec.encode("", true);
  if (prompt.empty()) prompt.push_back(0);
  prompt.resize(1);
  engine::GenerateRequest r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0;
  r.stop.max_new_tokens = 1;
  r.stop.ignore_eos = true;
  GenerationJob job(state.backend, state.metrics, "/health_generate");
  std::vector<engine::GenerateRequest> reqs;
  reqs.push_back(std::move(r));
  try {
    job.start(std::move(reqs));
  } catch (const engine::QueueFull&) {
    throw HttpError(503, "the request queue is full");
  }
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!job.all_finished() && Clock::now() < deadline) job.next(std::chrono::milliseconds(100));
  if (!job.all_finished()) throw HttpError(503, "health generation did not finish in 20 s");
  if (job.result(0).completion_tokens < 1) {
    throw HttpError(503, "health generation produced no token: " + job.result(0).error);
  }
  res.status = 200;
}

json model_info(const ServerState& state) {
  const ModelCard& m = state.model;
  return {{"model_path", m.path},
          {"tokenizer_path", m.path},
          {"served_model_name", m.id},
          {"is_generation", m.is_generation},
          {"model_type", m.architecture},
          {"architectures", json::array({m.architecture})},
          {"context_length", m.context_length},
          {"vocab_size", m.vocab_size},
          {"n_params", m.n_params},
          {"weight_version", "default"},
          {"preferred_sampling_params", nullptr},
          {"has_image_understanding", false},
          {"has_audio_understanding", false}};
}

json engine_state(const ServerState& state) {
  auto s = state.backend.stats();
  return {{"queued_requests", s.queued},          {"running_requests", s.running},
          {"kv_pages_total", s.kv_pages_total},   {"kv_pages_used", s.kv_pages_used},
          {"kv_pages_cached", s.kv_pages_cached}, {"graph_steps", s.graph_steps},
          {"eager_steps", s.eager_steps},         {"mixed_steps", s.mixed_steps},
          {"preemptions", s.preemptions}};
}

// SGLang's /get_load: one entry per data-parallel rank (kiln has one), which sglang-router's
// load-aware policies poll. num_tokens: KV tokens held by requests in flight.
json worker_load(const ServerState& state) {
  const auto s = state.backend.stats();
  int64_t page_size = 1;
  if (state.options.server_args.is_object())
    page_size = state.options.server_args.value("page_size", int64_t{1});
  return json::array({{{"dp_rank", 0},
                       {"num_reqs", s.running + s.queued},
                       {"num_waiting_reqs", s.queued},
                       {"num_tokens", (s.kv_pages_used - s.kv_pages_cached) * page_size}}});
}

void handle_tokenize(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  json body = parse_json_body(req);
  if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object");
  const json* prompt = field(body, "prompt");
  if (!prompt) bad_field("prompt", "is required");
  bool add_special = bool_field(body, "add_special_tokens", "", true);
  auto encode = [&](const std::string& text) { return state.codec.encode(text, add_special); };
  json out = {{"max_model_len", state.model.context_length}};
  if (prompt->is_string()) {
    auto ids = encode(prompt->get<std::string>());
    out["tokens"] = ids;
    out["count"] = ids.size();
  } else if (prompt->is_array()) {
    json tokens = json::array(), counts = json::array();
    for (size_t i = 0; i < prompt->size(); ++i) {
      auto ids = encode(as_string((*prompt)[i], fmt::format("prompt[{}]", i)));
      counts.push_back(ids.size());
      tokens.push_back(std::move(ids));
    }
    out["tokens"] = std::move(tokens);
    out["count"] = std::move(counts);
  } else {
    bad_field("prompt", "must be a string or a list of strings");
  }
  set_json(res, out);
}

void handle_detokenize(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  json body = parse_json_body(req);
  if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object");
  const json* tokens = field(body, "tokens");
  if (!tokens) bad_field("tokens", "is required");
  bool skip = bool_field(body, "skip_special_tokens", "", true);
  const int64_t vocab = state.codec.vocab_size();
  as_array(*tokens, "tokens");
  if (!tokens->empty() && (*tokens)[0].is_array()) {
    json texts = json::array();
    for (size_t i = 0; i < tokens->size(); ++i) {
      texts.push_back(state.codec.decode(
          as_token_ids((*tokens)[i], fmt::format("tokens[{}]", i), vocab), skip));
    }
    set_json(res, {{"text", texts}});
    return;
  }
  // "text" as SGLang names it, "prompt" as vLLM does (lm-eval's remote tokenizer reads it).
  const std::string text = state.codec.decode(as_token_ids(*tokens, "tokens", vocab), skip);
  set_json(res, {{"text", text}, {"prompt", text}});
}

// vLLM's /tokenizer_info: what a client needs to use /tokenize and /detokenize as its
// tokenizer (lm-evaluation-harness's remote tokenizer).
json tokenizer_info(const ServerState& state) {
  const TextCodec::Specials s = state.codec.specials();
  auto or_null = [](const std::string& v) { return v.empty() ? json(nullptr) : json(v); };
  return {{"tokenizer_class", "kiln"},
          {"bos_token", or_null(s.bos)},
          {"eos_token", or_null(s.eos)},
          {"pad_token", or_null(s.pad)},
          {"chat_template", or_null(s.chat_template)},
          {"model_max_length", state.model.context_length},
          {"vocab_size", state.codec.vocab_size()}};
}

}  // namespace

void add_native_routes(Router& router, ServerState& state) {
  router.post("/generate", [&state](const HttpRequest& req, HttpResponse& res) {
    handle_generate(state, req, res);
  });
  router.get_quick("/health", [](const HttpRequest&, HttpResponse& res) { res.status = 200; });
  router.get("/health_generate", [&state](const HttpRequest&, HttpResponse& res) {
    handle_health_generate(state, res);
  });
  // SGLang's current names and the deprecated get_ ones (sglang-router tries both).
  for (const char* path : {"/model_info", "/get_model_info"}) {
    router.get(path, [&state](const HttpRequest&, HttpResponse& res) {
      set_json(res, model_info(state));
    });
  }
  for (const char* path : {"/server_info", "/get_server_info"}) {
    router.get(path, [&state](const HttpRequest&, HttpResponse& res) {
      json info =
          state.options.server_args.is_object() ? state.options.server_args : json::object();
      info["version"] = KILN_VERSION;
      info["model_info"] = model_info(state);
      info["internal_states"] = json::array({engine_state(state)});
      set_json(res, info);
    });
  }
  router.get_quick("/get_load", [&state](const HttpRequest&, HttpResponse& res) {
    set_json(res, worker_load(state));
  });
  // SGLang accepts both methods (its docs use `curl -X POST` without a body, scripts use GET).
  auto flush = [&state](const HttpRequest&, HttpResponse& res) {
    if (!state.backend.flush_cache()) {
      throw HttpError(400, "the cache was not flushed: requests are running or waiting");
    }
    res.set_content("Cache flushed.\n", "text/plain");
  };
  router.get("/flush_cache", flush);
  router.post("/flush_cache", flush);
  router.post("/tokenize", [&state](const HttpRequest& req, HttpResponse& res) {
    handle_tokenize(state, req, res);
  });
  router.post("/detokenize", [&state](const HttpRequest& req, HttpResponse& res) {
    handle_detokenize(state, req, res);
  });
  router.get("/tokenizer_info", [&state](const HttpRequest&, HttpResponse& res) {
    set_json(res, tokenizer_info(state));
  });
}

}  // namespace kiln::server
