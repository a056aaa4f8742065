#include "http_client.h"

#include "kiln/base/error.h"

namespace kiln::cli {

using nlohmann::json;

namespace {

// "scheme://host:port/prefix" -> ("scheme://host:port", "/prefix").
std::pair<std::string, std::string> split_url(const std::string& url) {
  size_t scheme_end = url.find("://");
  KILN_CHECK(scheme_end != std::string::npos, "URL {} needs a scheme (http://...)", url);
  KILN_CHECK(url.compare(0, scheme_end, "http") == 0, "URL {}: only http:// is supported", url);
  size_t path_start = url.find('/', scheme_end + 3);
  if (path_start == std::string::npos) return {url, ""};
  std::string prefix = url.substr(path_start);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return {url.substr(0, path_start), prefix};
}

std::string error_message(const httplib::Result& r) {
  try {
    auto j = json::parse(r->body);
    if (j.contains("error") && j["error"].contains("message")) {
      return j["error"]["message"].get<std::string>();
    }
  } catch (const json::exception&) {
  }
  return r->body;
}

}  // namespace

JsonClient::JsonClient(const std::string& base_url, const std::string& api_key, int timeout_s)
    : url_(base_url) {
  auto [host, prefix] = split_url(base_url);
  prefix_ = prefix;
  client_ = std::make_unique<httplib::Client>(host);
  KILN_CHECK(client_->is_valid(), "invalid server URL {}", base_url);
  client_->set_connection_timeout(10);
  client_->set_read_timeout(timeout_s);
  client_->set_write_timeout(timeout_s);
  client_->set_keep_alive(true);
  if (!api_key.empty()) client_->set_bearer_token_auth(api_key);
}

json JsonClient::get(const std::string& path) {
  auto r = client_->Get((prefix_ + path).c_str());
  KILN_CHECK(r, "GET {}{}: {}", url_, path, httplib::to_string(r.error()));
  KILN_CHECK(r->status / 100 == 2, "GET {}{}: HTTP {}: {}", url_, path, r->status,
             error_message(r));
  return r->body.empty() ? json() : json::parse(r->body);
}

json JsonClient::post(const std::string& path, const json& body) {
  auto r = client_->Post((prefix_ + path).c_str(), body.dump(), "application/json");
  KILN_CHECK(r, "POST {}{}: {}", url_, path, httplib::to_string(r.error()));
  KILN_CHECK(r->status / 100 == 2, "POST {}{}: HTTP {}: {}", url_, path, r->status,
             error_message(r));
  return json::parse(r->body);
}

void JsonClient::post_expect_ok(const std::string& path) {
  auto r = client_->Post((prefix_ + path).c_str(), "", "application/json");
  KILN_CHECK(r, "POST {}{}: {}", url_, path, httplib::to_string(r.error()));
  KILN_CHECK(r->status / 100 == 2, "POST {}{}: HTTP {}: {}", url_, path, r->status,
             error_message(r));
}

void JsonClient::post_stream(
    const std::string& path, const json& body,
    const std::function<void(const json&, std::chrono::steady_clock::time_point)>& on_event) {
  httplib::Request req;
  req.method = "POST";
  req.path = prefix_ + path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  std::string buffer;
  std::string error_body;
  bool ok_status = true;
  req.response_handler = [&](const httplib::Response& res) {
    ok_status = res.status / 100 == 2;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    auto now = std::chrono::steady_clock::now();
    if (!ok_status) {
      error_body.append(data, n);
      return true;
    }
    buffer.append(data, n);
    // Events are separated by a blank line; a network read may end mid-event.
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      std::string payload = event.substr(6);
      if (payload == "[DONE]") continue;
      on_event(json::parse(payload), now);
    }
    return true;
  };
  auto r = client_->send(req);
  KILN_CHECK(r, "POST {}{}: {}", url_, path, httplib::to_string(r.error()));
  if (!ok_status) {
    std::string msg = error_body;
    try {
      msg = json::parse(error_body)["error"]["message"].get<std::string>();
    } catch (const json::exception&) {
    }
    fail("POST {}{}: HTTP {}: {}", url_, path, r->status, msg);
  }
}

}  // namespace kiln::cli
