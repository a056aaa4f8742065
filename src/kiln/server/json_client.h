// A small JSON-over-HTTP client for the tools that talk to a running server (`kiln eval`,
// `kiln bench serving`): POST a JSON body and read a JSON reply, or read a server-sent-event
// stream payload by payload as it arrives. Errors (connection refused, non-2xx status) are
// kiln::Error with the server's message.
#pragma once
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/server/http_client.h"

namespace kiln::server {

class JsonClient {
 public:
  using Clock = std::chrono::steady_clock;

  // base_url: "http://host:port"; a path prefix is kept ("http://h:1/api" posts to /api/...).
  // The API key, when given, goes as "Authorization: Bearer <key>".
  explicit JsonClient(const std::string& base_url, const std::string& api_key = {},
                      int timeout_s = 600);
  nlohmann::json get(const std::string& path);
  nlohmann::json post(const std::string& path, const nlohmann::json& body);
  // A POST whose reply is not JSON (SGLang's /flush_cache answers with text): 2xx or throws.
  void post_expect_ok(const std::string& path);
  // Streams: on_event(payload, arrival time) for each `data:` JSON payload until [DONE], each
  // as soon as the network read that completes it returns.
  void post_stream(const std::string& path, const nlohmann::json& body,
                   const std::function<void(const nlohmann::json&, Clock::time_point)>& on_event);

 private:
  HttpRequest request(const std::string& method, const std::string& path) const;
  // The reply, or kiln::Error naming the request, the status and the server's message.
  HttpResponse checked(const HttpRequest& req, const BodyWriter* on_body = nullptr);

  std::string url_;
  HttpUrl endpoint_;
  HttpHeaders headers_;
  HttpClient client_;
};

// The message of a kiln (or OpenAI-style) JSON error body, else the body itself.
std::string error_message(const std::string& body);

}  // namespace kiln::server
