// A synchronous HTTP/1.1 client on Boost.Beast, for the tools that talk to a running server
// (`kiln eval`, `kiln bench serving`, through json_client.h) and for the server's tests: one
// connection, kept alive between requests, every step bounded by a timeout. It lives beside
// the server because both sides share kiln's message types (http_message.h).
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "kiln/server/http_message.h"

namespace kiln::server {

// "http://host:port/prefix" split up; the port defaults to 80, the prefix ("/api", no trailing
// slash) is empty when the URL has no path. Throws kiln::Error for another scheme.
struct HttpUrl {
  std::string host;
  std::string port;
  std::string prefix;
};
HttpUrl parse_http_url(const std::string& url);

struct HttpClientTimeouts {
  std::chrono::milliseconds connect{10000};
  // Each wait for the server (a write, the reply's head, the next piece of its body): a
  // stream may last longer in all, as long as it keeps sending.
  std::chrono::milliseconds io{600000};
};

class HttpClient {
 public:
  HttpClient(std::string host, std::string port, HttpClientTimeouts timeouts = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `req` (method, target, headers, body; Host, Content-Length and User-Agent are added)
  // and returns the reply whatever its status. With `on_body`, a 2xx reply's body is handed to
  // it piece by piece as it arrives instead of being collected (returning false stops reading
  // and drops the connection). Throws kiln::Error when the server cannot be reached, stops
  // answering for the io timeout, or does not answer HTTP.
  HttpResponse send(const HttpRequest& req, const BodyWriter* on_body = nullptr);
  // A GET through send().
  HttpResponse get(const std::string& target, const HttpHeaders& headers = {});

 private:
  struct Connection;
  HttpResponse exchange(const HttpRequest& req, const BodyWriter* on_body, bool* retryable);

  std::string host_;
  std::string port_;
  HttpClientTimeouts timeouts_;
  std::unique_ptr<Connection> conn_;
};

}  // namespace kiln::server
