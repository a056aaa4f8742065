#include "kiln/server/openai_routes.h"

#include <fmt/format.h>

#include <optional>

#include "kiln/base/bounded_json.h"
#include "kiln/server/client_watch.h"
#include "kiln/server/generation_job.h"
#include "kiln/server/http_error.h"
#include "kiln/server/openai_request_parser.h"
#include "kiln/server/openai_responses.h"
#include "kiln/server/request_builder.h"
#include "kiln/server/sse_stream.h"
#include "kiln/server/tool_call_stream.h"
#include "kiln/server/tool_request.h"

namespace kiln::server {

namespace {

using nlohmann::json;

// What every response of one request repeats.
struct ResponseHeader {
  std::string id;
  int64_t created = 0;
  std::string model;
};

ResponseHeader make_header(const char* prefix, const ServerState& state) {
  return {random_id(prefix), unix_time_now(), state.model.id};
}

// The envelope around every response object and stream chunk of a request: id, `object`,
// created, model, choices, and `usage` when given (null in stream chunks when the client asked
// for usage at the end; the last chunk then carries it).
json envelope(const ResponseHeader& head, const char* object, json choices,
              std::optional<json> usage = std::nullopt) {
  json out = {{"id", head.id},
              {"object", object},
              {"created", head.created},
              {"model", head.model},
              {"choices", std::move(choices)}};
  if (usage) out["usage"] = std::move(*usage);
  return out;
}

void throw_if_engine_failed(const GenerationJob& job) {
  for (size_t i = 0; i < job.size(); ++i) {
    if (!job.result(i).error.empty()) throw HttpError(500, job.result(i).error);
  }
}

json matched_stop(const SequenceResult& r) {
  if (!r.matched_stop.empty()) return r.matched_stop;
  if (r.matched_stop_token >= 0) return r.matched_stop_token;
  return nullptr;
}

json model_object(const ServerState& state) {
  return {{"id", state.model.id},       {"object", "model"},
          {"created", unix_time_now()}, {"owned_by", "kiln"},
          {"root", state.model.id},     {"max_model_len", state.model.context_length}};
}

// ---- /v1/completions ----

void handle_completions(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  auto parsed = parse_completion_request(parse_json_body(req), state.parse_limits());
  if (parsed.prompts.size() > static_cast<size_t>(state.options.max_batch_prompts)) {
    bad_field("prompt", "has {} prompts, more than {}", parsed.prompts.size(),
              state.options.max_batch_prompts);
  }
  const int n = parsed.options.n;
  check_sequence_count(static_cast<int64_t>(parsed.prompts.size()) * n,
                       state.options.max_request_sequences, "n");
  std::vector<engine::GenerateRequest> requests;
  // echo: each choice's text starts with its prompt (as given, or decoded from token ids).
  auto echoed = std::make_shared<std::vector<std::string>>();
  for (size_t i = 0; i < parsed.prompts.size(); ++i) {
    std::string path = parsed.prompts.size() > 1 ? fmt::format("prompt[{}]", i) : "prompt";
    auto ids = tokenize_prompt(parsed.prompts[i], state.codec, state.prompt_limits(), path);
    for (int j = 0; j < n; ++j) {
      requests.push_back(make_engine_request(ids, parsed.options, j, parsed.logprobs,
                                             state.prompt_limits(), path));
      if (parsed.echo && parsed.logprobs >= 0) requests.back().prompt_logprobs_from = 0;
      if (parsed.echo) {
        echoed->push_back(parsed.prompts[i].is_text ? parsed.prompts[i].text
                                                    : state.codec.decode(ids, false));
      }
    }
  }
  auto job = std::make_shared<GenerationJob>(state.backend, state.metrics, "/v1/completions");
  job->start(std::move(requests));
  const ResponseHeader head = make_header("cmpl-", state);
  const int top_n = parsed.logprobs;
  const bool echo = parsed.echo;

  if (!parsed.stream) {
    ActiveGeneration active(state);
    job->wait_all(ClientWatch::client_gone);
    throw_if_engine_failed(*job);
    json choices = json::array();
    for (size_t i = 0; i < job->size(); ++i) {
      const auto& r = job->result(i);
      const std::string prefix = echo ? (*echoed)[i] : std::string();
      json lp = nullptr;
      if (top_n >= 0) {
        lp = completion_logprobs(r.logprobs, 0, r.logprobs.size(), top_n, prefix.size(),
                                 state.codec);
        if (echo) {
          json prompt_lp = prompt_completion_logprobs(r, top_n, state.codec);
          append_logprobs(prompt_lp, lp);
          lp = std::move(prompt_lp);
        }
      }
      choices.push_back({{"index", i},
                         {"text", prefix + r.text},
                         {"logprobs", lp},
                         {"finish_reason", openai_finish_reason(r)},
                         {"matched_stop", matched_stop(r)}});
    }
    set_json(res, envelope(head, "text_completion", choices, openai_usage(*job, n)));
    return;
  }

  const bool usage = parsed.include_usage;
  SseRenderer renderer;
  // With echo, each choice's first chunk carries the prompt (and its logprobs, which arrive
  // with the first generated token's event).
  auto echo_sent = std::make_shared<std::vector<bool>>(job->size(), !echo);
  auto logprobs_sent = std::make_shared<std::vector<size_t>>(job->size(), 0);
  // Each choice's next text_offset: the pieces' sizes added up, as the non-streamed response
  // counts them (a piece that is part of a UTF-8 character decodes to U+FFFD, so the pieces
  // need not add up to the text).
  auto next_offset = std::make_shared<std::vector<size_t>>(job->size(), 0);
  renderer.on_update = [&state, head, top_n, usage, echoed, echo_sent, logprobs_sent, next_offset](
                           const GenerationJob& j, const GenerationJob::Update& u) {
    const auto& e = u.event;
    std::vector<json> chunks;
    auto chunk_of = [&](const std::string& text, json lp, const SequenceResult& r,
                        bool final_fields) {
      json choice = {{"index", u.index},
                     {"text", text},
                     {"logprobs", std::move(lp)},
                     {"finish_reason", final_fields ? openai_finish_reason(r) : json(nullptr)},
                     {"matched_stop", final_fields ? matched_stop(r) : json(nullptr)}};
      return envelope(head, "text_completion", json::array({std::move(choice)}),
                      usage ? std::optional<json>(nullptr) : std::nullopt);
    };
    const auto& r = j.result(u.index);
    const std::string prefix = echoed->empty() ? std::string() : (*echoed)[u.index];
    if (!(*echo_sent)[u.index] && (!e.new_tokens.empty() || e.finished)) {
      (*echo_sent)[u.index] = true;
      json lp = top_n >= 0 ? prompt_completion_logprobs(r, top_n, state.codec) : json(nullptr);
      chunks.push_back(chunk_of(prefix, std::move(lp), r, false));
    }
    // While the engine holds text back (it may start a stop string) the event has no text and
    // no chunk goes out; its tokens' logprobs wait for the chunk that releases the text (or the
    // final one), so each token's entry reaches the client exactly once, in order.
    if (e.text_delta.empty() && !e.finished) return chunks;
    json lp = nullptr;
    if (top_n >= 0) {
      size_t& sent = (*logprobs_sent)[u.index];
      size_t& offset = (*next_offset)[u.index];
      if (sent == 0) offset = prefix.size();
      lp = completion_logprobs(r.logprobs, sent, r.logprobs.size(), top_n, offset, state.codec);
      for (const auto& piece : lp["tokens"]) offset += piece.get_ref<const std::string&>().size();
      sent = r.logprobs.size();
    }
    chunks.push_back(chunk_of(e.text_delta, std::move(lp), r, true));
    return chunks;
  };
  if (usage) {
    renderer.on_finish = [head, n](const GenerationJob& j) {
      return std::vector<json>{
          envelope(head, "text_completion", json::array(), openai_usage(j, n))};
    };
  }
  stream_job(res, std::move(job), state, std::move(renderer));
}

// ---- /v1/chat/completions ----

// "tool_calls" when the reply made calls and ended by itself; the engine's reason otherwise.
json chat_finish_reason(const SequenceResult& r, bool called) {
  json reason = openai_finish_reason(r);
  return called && reason == "stop" ? json("tool_calls") : reason;
}

// How a chat's reply is read for tool calls: what the model's tool-call format (its row in
// model/tool_call_format.h) and the request's tools make of it.
struct ChatCallReading {
  ToolCallFormat format = ToolCallFormat::kNone;
  bool parse = false;   // the reply is read for calls (ChatTools::parse_calls)
  bool opened = false;  // a forced call: the prompt ends with the format's forced_prefill
  size_t max_calls = SIZE_MAX;
};

// The request's tool definitions as the template writes them (none without tools). Refuses
// tools when the model's template has no tool format.
std::vector<std::string> chat_tool_definitions(const ServerState& state, const ChatTools& tools,
                                               const HttpRequest& req) {
  if (tools.tools.empty()) return {};
  if (std::string why = state.codec.tools_refusal(); !why.empty()) {
    throw HttpError(400, "tools cannot be used: " + why, "tools");
  }
  // The template writes each tool with its keys in the client's order: parse them again keeping
  // it (the request was parsed with sorted keys).
  return render_tool_definitions(parse_ordered_json_bounded(req.body, true));
}

// What the model's format asks of the generation. A forced call is constrained to the call's
// JSON (parse_chat_request set the schema) and the model's turn ends when it is complete; in
// Qwen's format the reply opens inside <tool_call>, in Mistral's after [TOOL_CALLS], in Llama
// 3.1's the JSON is the whole reply.
ChatCallReading plan_call_reading(const ServerState& state, GenerationOptions& options,
                                  const ChatTools& tools) {
  ChatCallReading out;
  out.format = state.codec.tool_call_format();
  const model::ToolCallFormatRow& row = model::tool_call_format_row(out.format);
  out.parse = tools.parse_calls();
  out.opened = tools.forced() && !row.forced_prefill.empty();
  out.max_calls = tools.parallel ? SIZE_MAX : 1;
  if (!out.parse) return out;
  // Markers that are control tokens (Mistral's [TOOL_CALLS]) stay in the text so that the
  // parser (and the auto constraint's marker) can see them.
  if (row.markers_are_special) options.skip_special_tokens = false;
  // Mistral Large 2407's template writes a space after the marker: the array may follow one.
  if (out.opened && row.forced_leading_space) options.sampling.json_leading_space = true;
  if (!tools.parallel && !out.opened && !row.single_call_stop.empty()) {
    options.stop.stop_strings.emplace_back(row.single_call_stop);  // nothing after the first call
  }
  return out;
}

// The prompt: the rendered chat (bounded like a text prompt before it is tokenized; the
// messages' own bytes would not do, as a template may drop part of a message, e.g. earlier
// reasoning), opening the forced call when there is one.
std::vector<int32_t> chat_prompt_ids(const ServerState& state, const ChatRequest& parsed,
                                     const std::vector<std::string>& tool_definitions,
                                     const ChatCallReading& calls) {
  PromptInput chat_prompt;
  chat_prompt.text = state.codec.render_chat(parsed.messages, tool_definitions);
  if (calls.opened) chat_prompt.text += model::tool_call_format_row(calls.format).forced_prefill;
  return tokenize_prompt(chat_prompt, state.codec, state.prompt_limits(), "messages");
}

std::shared_ptr<GenerationJob> start_chat_job(ServerState& state, const ChatRequest& parsed,
                                              const std::vector<int32_t>& ids) {
  const int engine_logprobs = parsed.logprobs ? parsed.top_logprobs : -1;
  std::vector<engine::GenerateRequest> requests;
  for (int j = 0; j < parsed.options.n; ++j) {
    requests.push_back(make_engine_request(ids, parsed.options, j, engine_logprobs,
                                           state.prompt_limits(), "messages"));
  }
  auto job = std::make_shared<GenerationJob>(state.backend, state.metrics, "/v1/chat/completions");
  job->start(std::move(requests));
  return job;
}

// The whole response once every choice is done: each reply read for calls at once.
void respond_chat_whole(ServerState& state, GenerationJob& job, const ResponseHeader& head,
                        const ChatRequest& parsed, const ChatCallReading& calls,
                        HttpResponse& res) {
  ActiveGeneration active(state);
  job.wait_all(ClientWatch::client_gone);
  throw_if_engine_failed(job);
  json choices = json::array();
  for (size_t i = 0; i < job.size(); ++i) {
    const auto& r = job.result(i);
    json lp = parsed.logprobs ? chat_logprobs(r.logprobs, 0, r.logprobs.size(), parsed.top_logprobs,
                                              state.codec)
                              : json(nullptr);
    json message = {{"role", "assistant"}, {"content", r.text}};
    bool called = false;
    if (calls.parse) {
      ToolReply reply = parse_tool_reply(r.text, calls.opened, calls.max_calls, calls.format);
      message["content"] = reply.content ? json(*reply.content) : json(nullptr);
      if (!reply.calls.empty()) {
        message["tool_calls"] = tool_calls_json(reply.calls);
        called = true;
      }
    }
    choices.push_back({{"index", i},
                       {"message", std::move(message)},
                       {"logprobs", lp},
                       {"finish_reason", chat_finish_reason(r, called)},
                       {"matched_stop", matched_stop(r)}});
  }
  set_json(res, envelope(head, "chat.completion", choices, openai_usage(job, parsed.options.n)));
}

// A stream update's delta with the reply read for calls: call text goes out as
// delta.tool_calls, never as content. `called`: the reply has made valid calls so far.
json delta_with_calls(ToolCallStream& stream, const engine::RequestEvent& e, bool& called) {
  ToolCallStream::Delta d = stream.feed(e.text_delta);
  if (e.finished) {
    ToolCallStream::Delta last = stream.finish();
    d.content += last.content;
    for (auto& c : last.tool_calls) d.tool_calls.push_back(std::move(c));
  }
  json delta = json::object();
  if (!d.content.empty()) delta["content"] = std::move(d.content);
  if (!d.tool_calls.empty()) delta["tool_calls"] = std::move(d.tool_calls);
  called = !stream.calls().empty() && !stream.any_invalid();
  return delta;
}

// Each choice's reply read for tool calls as it streams (null when the request has none).
std::shared_ptr<std::vector<ToolCallStream>> make_call_streams(const ChatCallReading& calls,
                                                               size_t choices) {
  if (!calls.parse) return nullptr;
  auto out = std::make_shared<std::vector<ToolCallStream>>();
  out->reserve(choices);
  for (size_t i = 0; i < choices; ++i)
    out->emplace_back(calls.opened, calls.max_calls, calls.format);
  return out;
}

// The response as server-sent events.
void stream_chat(ServerState& state, std::shared_ptr<GenerationJob> job, const ResponseHeader& head,
                 const ChatRequest& parsed, const ChatCallReading& calls, HttpResponse& res) {
  const bool usage = parsed.include_usage;
  const bool logprobs = parsed.logprobs;
  const int top_n = parsed.top_logprobs;
  auto role_sent = std::make_shared<std::vector<bool>>(job->size(), false);
  auto logprobs_sent = std::make_shared<std::vector<size_t>>(job->size(), 0);
  auto chunk_of = [head, usage](json choice) {
    return envelope(head, "chat.completion.chunk", json::array({std::move(choice)}),
                    usage ? std::optional<json>(nullptr) : std::nullopt);
  };
  auto call_streams = make_call_streams(calls, job->size());
  SseRenderer renderer;
  renderer.on_update = [&state, role_sent, logprobs_sent, chunk_of, logprobs, top_n, call_streams](
                           const GenerationJob& j, const GenerationJob::Update& u) {
    std::vector<json> out;
    const auto& e = u.event;
    const auto& r = j.result(u.index);
    // The first chunk of each choice announces the role, as OpenAI's stream does.
    if (!(*role_sent)[u.index]) {
      (*role_sent)[u.index] = true;
      out.push_back(chunk_of({{"index", u.index},
                              {"delta", {{"role", "assistant"}, {"content", ""}}},
                              {"logprobs", nullptr},
                              {"finish_reason", nullptr}}));
    }
    // Held-back text: the logprobs wait for the chunk that releases it (as in completions).
    if (e.text_delta.empty() && !e.finished) return out;
    json delta = json::object();
    bool called = false;
    if (call_streams) {
      delta = delta_with_calls((*call_streams)[u.index], e, called);
      if (delta.empty() && !e.finished) return out;
    } else if (!e.text_delta.empty()) {
      delta["content"] = e.text_delta;
    }
    json lp = nullptr;
    if (logprobs) {
      size_t& sent = (*logprobs_sent)[u.index];
      lp = chat_logprobs(r.logprobs, sent, r.logprobs.size(), top_n, state.codec);
      sent = r.logprobs.size();
    }
    json choice = {{"index", u.index},
                   {"delta", std::move(delta)},
                   {"logprobs", lp},
                   {"finish_reason", chat_finish_reason(r, called)}};
    if (r.finished) choice["matched_stop"] = matched_stop(r);
    out.push_back(chunk_of(std::move(choice)));
    return out;
  };
  if (usage) {
    renderer.on_finish = [head, n = parsed.options.n](const GenerationJob& j) {
      return std::vector<json>{
          envelope(head, "chat.completion.chunk", json::array(), openai_usage(j, n))};
    };
  }
  stream_job(res, std::move(job), state, std::move(renderer));
}

void handle_chat(ServerState& state, const HttpRequest& req, HttpResponse& res) {
  auto parsed = parse_chat_request(parse_json_body(req), state.parse_limits());
  check_sequence_count(parsed.options.n, state.options.max_request_sequences, "n");
  const std::vector<std::string> tool_definitions = chat_tool_definitions(state, parsed.tools, req);
  const ChatCallReading calls = plan_call_reading(state, parsed.options, parsed.tools);
  const std::vector<int32_t> ids = chat_prompt_ids(state, parsed, tool_definitions, calls);
  auto job = start_chat_job(state, parsed, ids);
  const ResponseHeader head = make_header("chatcmpl-", state);
  if (parsed.stream) {
    stream_chat(state, std::move(job), head, parsed, calls, res);
  } else {
    respond_chat_whole(state, *job, head, parsed, calls, res);
  }
}

}  // namespace

void add_openai_routes(Router& router, ServerState& state) {
  router.post("/v1/completions", [&state](const HttpRequest& req, HttpResponse& res) {
    handle_completions(state, req, res);
  });
  router.post("/v1/chat/completions", [&state](const HttpRequest& req, HttpResponse& res) {
    handle_chat(state, req, res);
  });
  router.get("/v1/models", [&state](const HttpRequest&, HttpResponse& res) {
    set_json(res, {{"object", "list"}, {"data", json::array({model_object(state)})}});
  });
  // OpenAI's "retrieve model": the object for the served id, 404 in the error shape otherwise.
  // The id may contain '/' ("org/name"), so it is the whole rest of the path.
  router.get("/v1/models/(.+)", [&state](const HttpRequest& req, HttpResponse& res) {
    const std::string id = req.path.substr(std::string("/v1/models/").size());
    if (id != state.model.id) {
      throw HttpError(404, fmt::format("The model '{}' does not exist", id), "model");
    }
    set_json(res, model_object(state));
  });
}

}  // namespace kiln::server
