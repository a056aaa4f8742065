#include "kiln/server/openai_responses.h"

#include <fmt/format.h>

#include <chrono>
#include <mutex>
#include <random>

namespace kiln::server {

using nlohmann::json;

json openai_finish_reason(const SequenceResult& r) {
  if (!r.finished) return nullptr;
  switch (r.finish_reason) {
    case engine::FinishReason::Stop:
      return "stop";
    case engine::FinishReason::Length:
      return "length";
    default:
      return "abort";
  }
}

json completion_logprobs(const std::vector<engine::TokenLogprob>& lps, size_t begin, size_t end,
                         int top_n, size_t text_offset0, const TextCodec& codec) {
  json tokens = json::array(), token_logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  size_t offset = text_offset0;
  for (size_t i = begin; i < end && i < lps.size(); ++i) {
    std::string piece = codec.decode({lps[i].token}, false);
    tokens.push_back(piece);
    token_logprobs.push_back(lps[i].logprob);
    offsets.push_back(offset);
    offset += piece.size();
    if (top_n > 0) {
      json top = json::object();
      for (const auto& [id, lp] : lps[i].top) top[codec.decode({id}, false)] = lp;
      tops.push_back(std::move(top));
    } else {
      tops.push_back(nullptr);
    }
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json prompt_completion_logprobs(const SequenceResult& r, int top_n, const TextCodec& codec) {
  json tokens = json::array(), token_logprobs = json::array(), tops = json::array(),
       offsets = json::array();
  size_t offset = 0;
  for (size_t p = 0; p < r.prompt_ids.size(); ++p) {
    std::string piece = codec.decode({r.prompt_ids[p]}, false);
    const engine::TokenLogprob* lp = r.prompt_score(p);
    tokens.push_back(piece);
    token_logprobs.push_back(lp ? json(lp->logprob) : json(nullptr));
    offsets.push_back(offset);
    offset += piece.size();
    json top = nullptr;
    if (lp != nullptr && top_n > 0) {
      top = json::object();
      for (const auto& [id, alt] : lp->top) top[codec.decode({id}, false)] = alt;
    }
    tops.push_back(std::move(top));
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

void append_logprobs(json& head, const json& tail) {
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
    for (const auto& v : tail.at(key)) head[key].push_back(v);
  }
}

namespace {

json token_bytes(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

json chat_logprobs(const std::vector<engine::TokenLogprob>& lps, size_t begin, size_t end,
                   int top_n, const TextCodec& codec) {
  json content = json::array();
  for (size_t i = begin; i < end && i < lps.size(); ++i) {
    std::string piece = codec.decode({lps[i].token}, false);
    json top = json::array();
    for (const auto& [id, lp] : lps[i].top) {
      if (static_cast<int>(top.size()) >= top_n) break;
      std::string alt = codec.decode({id}, false);
      top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", token_bytes(alt)}});
    }
    content.push_back({{"token", piece},
                       {"logprob", lps[i].logprob},
                       {"bytes", token_bytes(piece)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json openai_usage(const GenerationJob& job, int n) {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (size_t i = 0; i < job.size(); ++i) {
    const auto& r = job.result(i);
    if (i % n == 0) {
      prompt += r.prompt_tokens;
      cached += r.cached_tokens;
    }
    completion += r.completion_tokens;
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

std::string random_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mu);
  return fmt::format("{}{:016x}{:016x}", prefix, rng(), rng());
}

int64_t unix_time_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace kiln::server
