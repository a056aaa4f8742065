// A kiln HttpServer on a free loopback port over the fake backend, with helpers for the HTTP
// tests (routes, connection handling, limits, streaming).
#pragma once
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/server/http_client.h"
#include "kiln/server/http_server.h"
#include "server/fake_backend.h"

namespace kiln::server::testing {

// The tests' HTTP client: an exchange that fails (no answer) gives an empty optional, so a
// test asserts on it instead of ending in an exception.
class TestClient {
 public:
  explicit TestClient(int port)
      : client_(std::make_unique<HttpClient>("127.0.0.1", std::to_string(port), timeouts())) {}

  std::optional<HttpResponse> send(const std::string& method, const std::string& target,
                                   const HttpHeaders& headers = {}, std::string body = {},
                                   const BodyWriter* on_body = nullptr) {
    HttpRequest req;
    req.method = method;
    req.target = target;
    req.headers = headers;
    req.body = std::move(body);
    try {
      return client_->send(req, on_body);
    } catch (const kiln::Error&) {
      return std::nullopt;
    }
  }
  std::optional<HttpResponse> get(const std::string& target, const HttpHeaders& headers = {}) {
    return send("GET", target, headers);
  }
  std::optional<HttpResponse> post(const std::string& target, std::string body = {},
                                   HttpHeaders headers = {}) {
    if (!body.empty() && !headers.has("Content-Type")) {
      headers.set("Content-Type", "application/json");
    }
    return send("POST", target, headers, std::move(body));
  }
  std::optional<HttpResponse> options(const std::string& target, const HttpHeaders& headers = {}) {
    return send("OPTIONS", target, headers);
  }

 private:
  static HttpClientTimeouts timeouts() {
    HttpClientTimeouts t;
    t.io = std::chrono::seconds(10);
    return t;
  }
  std::unique_ptr<HttpClient> client_;
};

class ServerFixture : public ::testing::Test {
 protected:
  void start(ServerOptions options = {}, int step_ms = 1, int max_queued = 1000,
             int eos_after = 0) {
    engine_ = std::make_unique<FakeEngine>(step_ms, max_queued, eos_after);
    ModelCard card;
    card.id = "fake-model";
    card.path = "/models/fake.gguf";
    card.architecture = "fake";
    card.context_length = 64;
    card.vocab_size = codec_.vocab_size();
    options.port = 0;
    server_ = std::make_unique<HttpServer>(*engine_, codec_, card, options);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
  }
  void TearDown() override {
    if (engine_) engine_->shutdown();
    if (server_) {
      server_->wait_idle(std::chrono::seconds(5));
      server_->stop();
    }
    if (thread_.joinable()) thread_.join();
  }
  TestClient client() const { return TestClient(port_); }
  std::optional<HttpResponse> post(const std::string& path, const std::string& body,
                                   const HttpHeaders& headers = {}) {
    return client().post(path, body, headers);
  }
  // The JSON payloads of an SSE body (without [DONE]; `done` tells whether it came).
  static std::vector<nlohmann::json> sse_events(const std::string& body, bool* done = nullptr) {
    std::vector<nlohmann::json> out;
    size_t pos = 0;
    if (done) *done = false;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
      size_t end = body.find("\n\n", pos);
      std::string data = body.substr(pos + 6, end - pos - 6);
      if (data == "[DONE]") {
        if (done) *done = true;
      } else {
        out.push_back(nlohmann::json::parse(data));
      }
      pos = end;
    }
    return out;
  }

  FakeCodec codec_;
  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

// A plain TCP connection to the server, for what an HTTP client library would not send.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  void send(const std::string& bytes) { ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  // Everything the server sends until it closes the connection or `timeout` passes without a
  // byte; closed() then tells which.
  std::string read_until_close(std::chrono::milliseconds timeout) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        continue;
      }
      // An orderly close, or a reset (the server closed while bytes it never read were queued).
      closed_ = n == 0 || (n < 0 && errno == ECONNRESET);
      return out;
    }
  }
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

// The status codes of the HTTP responses in `bytes`, in order, each response framed by its
// Content-Length (one without it runs to the end; an interim 1xx has no body).
inline std::vector<int> response_statuses(const std::string& bytes) {
  std::vector<int> out;
  size_t pos = 0;
  while (bytes.compare(pos, 9, "HTTP/1.1 ") == 0) {
    out.push_back(std::stoi(bytes.substr(pos + 9, 3)));
    const size_t head_end = bytes.find("\r\n\r\n", pos);
    if (head_end == std::string::npos) break;
    const std::string head = bytes.substr(pos, head_end - pos);
    if (out.back() < 200) {  // an interim response (100 Continue) has no body
      pos = head_end + 4;
      continue;
    }
    const size_t cl = head.find("Content-Length: ");
    if (cl == std::string::npos) break;
    pos = head_end + 4 + std::stoul(head.substr(cl + 16));
  }
  return out;
}

}  // namespace kiln::server::testing
