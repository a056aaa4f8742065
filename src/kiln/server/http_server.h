// kiln's HTTP server: the SGLang-native and OpenAI routes plus /metrics over cpp-httplib, with
// a worker pool (one thread per connection in flight: a streaming response holds its worker),
// keep-alive, optional Bearer authentication, a body size limit (413, chunked bodies
// included), CORS preflights, and JSON errors for unknown routes (404) and wrong methods (405).
// Requests whose body may be left unread end their connection (http_framing.h,
// docs/http-server.md).
#pragma once
#include <chrono>
#include <memory>

#include "kiln/server/backend.h"
#include "kiln/server/server_state.h"

namespace httplib {
class Server;
}

namespace kiln::server {

class HttpServer {
 public:
  HttpServer(GenerationBackend& backend, const TextCodec& codec, ModelCard model,
             ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds options.host:options.port (port 0: any free port) and returns the port. Throws
  // kiln::Error when the address is taken or invalid.
  int bind();
  // Serves until stop(); call bind() first.
  void serve();
  // Stops accepting and closes connections; serve() returns. Safe from any thread.
  void stop();
  // Waits until no HTTP request has a generation in flight (or the time is up); used at
  // shutdown after the engine aborted everything, so streams can send their last event.
  bool wait_idle(std::chrono::milliseconds max_wait);

  int port() const { return port_; }
  ServerState& state() { return *state_; }

 private:
  std::unique_ptr<ServerState> state_;
  std::unique_ptr<httplib::Server> http_;
  int listen_socket_ = -1;  // the bound socket, seen through httplib's socket-options hook
  int port_ = 0;
};

}  // namespace kiln::server
