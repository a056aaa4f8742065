#include "kiln/server/json_client.h"

#include "kiln/base/error.h"

namespace kiln::server {

using nlohmann::json;

namespace {

HttpClientTimeouts timeouts_of(int timeout_s) {
  HttpClientTimeouts t;
  t.io = std::chrono::seconds(timeout_s);
  return t;
}

}  // namespace

std::string error_message(const std::string& body) {
  try {
    auto j = json::parse(body);
    if (j.is_object() && j.contains("error") && j["error"].is_object() &&
        j["error"].contains("message") && j["error"]["message"].is_string()) {
      return j["error"]["message"].get<std::string>();
    }
  } catch (const json::exception&) {
  }
  return body;
}

JsonClient::JsonClient(const std::string& base_url, const std::string& api_key, int timeout_s)
    : url_(base_url),
      endpoint_(parse_http_url(base_url)),
      client_(endpoint_.host, endpoint_.port, timeouts_of(timeout_s)) {
  if (!api_key.empty()) headers_.set("Authorization", "Bearer " + api_key);
}

HttpRequest JsonClient::request(const std::string& method, const std::string& path) const {
  HttpRequest req;
  req.method = method;
  req.target = endpoint_.prefix + path;
  req.headers = headers_;
  return req;
}

HttpResponse JsonClient::checked(const HttpRequest& req, const BodyWriter* on_body) {
  HttpResponse res = client_.send(req, on_body);
  const std::string path = req.target.substr(endpoint_.prefix.size());
  KILN_CHECK(res.status / 100 == 2, "{} {}{}: HTTP {}: {}", req.method, url_, path, res.status,
             error_message(res.body));
  return res;
}

json JsonClient::get(const std::string& path) {
  HttpResponse res = checked(request("GET", path));
  return res.body.empty() ? json() : json::parse(res.body);
}

json JsonClient::post(const std::string& path, const json& body) {
  HttpRequest req = request("POST", path);
  req.headers.set("Content-Type", "application/json");
  req.body = body.dump();
  return json::parse(checked(req).body);
}

void JsonClient::post_expect_ok(const std::string& path) {
  HttpRequest req = request("POST", path);
  req.headers.set("Content-Type", "application/json");
  checked(req);
}

void JsonClient::post_stream(const std::string& path, const json& body,
                             const std::function<void(const json&, Clock::time_point)>& on_event) {
  HttpRequest req = request("POST", path);
  req.headers.set("Content-Type", "application/json");
  req.headers.set("Accept", "text/event-stream");
  req.body = body.dump();
  std::string pending;
  const BodyWriter on_body = [&](std::string_view piece) {
    const auto now = Clock::now();
    pending.append(piece);
    // Events are separated by a blank line; a network read may end mid-event.
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") continue;
      on_event(json::parse(payload), now);
    }
    return true;
  };
  checked(req, &on_body);
}

}  // namespace kiln::server
