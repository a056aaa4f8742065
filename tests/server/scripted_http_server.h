// A loopback server whose every byte a test writes by hand, for testing the HTTP client: each
// accepted connection runs the test's script on the server's thread (read a request, answer,
// wait, close), so a test decides exactly when each piece of a reply goes out.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <functional>
#include <string>
#include <thread>

namespace kiln::server::testing {

class ScriptedConnection {
 public:
  explicit ScriptedConnection(int fd) : fd_(fd) {
    timeval tv{5, 0};  // a script never waits on the client for long
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~ScriptedConnection() { ::close(fd_); }
  ScriptedConnection(const ScriptedConnection&) = delete;
  ScriptedConnection& operator=(const ScriptedConnection&) = delete;

  // The next request's head (up to the blank line) and its Content-Length body; an empty head
  // when the client closed or sent nothing in time.
  std::string read_request(std::string* body = nullptr) {
    size_t end;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos) {
      if (!receive()) return {};
    }
    std::string head = pending_.substr(0, end + 4);
    pending_.erase(0, end + 4);
    size_t length = 0;
    if (size_t cl = lowercase(head).find("\r\ncontent-length: "); cl != std::string::npos) {
      length = std::stoul(head.substr(cl + 18));
    }
    while (pending_.size() < length) {
      if (!receive()) return {};
    }
    if (body) *body = pending_.substr(0, length);
    pending_.erase(0, length);
    return head;
  }
  void write(const std::string& bytes) { ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }

 private:
  static std::string lowercase(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  bool receive() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    pending_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  std::string pending_;
};

class ScriptedServer {
 public:
  using Script = std::function<void(ScriptedConnection&)>;

  // Serves `connections` connections, one after the other, each with `script`.
  explicit ScriptedServer(Script script, int connections = 1) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 4);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, script = std::move(script), connections] {
      for (int i = 0; i < connections; ++i) {
        const int fd = ::accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) return;
        ScriptedConnection c(fd);
        script(c);
      }
    });
  }
  ~ScriptedServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);  // ends a pending accept
    thread_.join();
    ::close(listen_fd_);
  }
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// A complete response with a Content-Length body.
inline std::string http_reply(int status, const std::string& body,
                              const std::string& extra_headers = {}) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace kiln::server::testing
