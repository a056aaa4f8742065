// A small JSON-over-HTTP client for the tools that talk to a running server (`kiln eval`,
// `kiln bench serving`): POST a JSON body and read a JSON reply, or read a server-sent-event
// stream payload by payload. Errors (connection refused, non-2xx status) are kiln::Error with
// the server's message.
#pragma once
#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace kiln::cli {

class JsonClient {
 public:
  // base_url: "http://host:port"; a path prefix is kept ("http://h:1/api" posts to /api/...).
  explicit JsonClient(const std::string& base_url, const std::string& api_key = {},
                      int timeout_s = 600);
  nlohmann::json get(const std::string& path);
  nlohmann::json post(const std::string& path, const nlohmann::json& body);
  // A POST whose reply is not JSON (SGLang's /flush_cache answers with text): 2xx or throws.
  void post_expect_ok(const std::string& path);
  // Streams: on_event(payload, arrival time) for each `data:` JSON payload until [DONE].
  void post_stream(const std::string& path, const nlohmann::json& body,
                   const std::function<void(const nlohmann::json&,
                                            std::chrono::steady_clock::time_point)>& on_event);

 private:
  std::unique_ptr<httplib::Client> client_;
  std::string prefix_;
  std::string url_;
};

}  // namespace kiln::cli
