// kiln's HTTP server: the SGLang-native and OpenAI routes plus /metrics on an event-driven
// transport (Boost.Beast over Asio, http_connection.h). I/O threads carry every connection
// asynchronously (header and body limits and deadlines, keep-alive, pipelining); route handlers
// run on a bounded pool of handler threads, so a blocked handler never stalls another
// connection and idle or slow connections cost no thread. Optional Bearer authentication and
// CORS preflights are answered before a body is read; unknown routes get JSON 404, wrong
// methods 405. Shutdown can drain: stop accepting, let requests in flight finish, then stop
// (docs/http-server.md).
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/server/backend.h"
#include "kiln/server/server_state.h"

namespace kiln::server {

class Router;
class HandlerPool;
class HttpConnection;
class HttpHost;
struct HttpIo;

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
  // The first step of a graceful shutdown: closes the listening socket, closes connections
  // that are idle or still sending a request, and makes every response in flight close its
  // connection when written. Requests already being handled go on. Safe from any thread.
  void stop_accepting();
  // Waits until no request is being handled (or the time is up).
  bool wait_requests_done(std::chrono::milliseconds max_wait);
  // Waits until no HTTP request has a generation in flight (or the time is up); used at
  // shutdown after the engine aborted everything, so streams can send their last event.
  bool wait_idle(std::chrono::milliseconds max_wait);
  // Requests handed to handler threads and not yet answered.
  int requests_in_flight() const;
  // Handler threads started so far (they are started on demand and kept).
  size_t handler_threads() const;

  int port() const { return port_; }
  ServerState& state() { return *state_; }

 private:
  std::unique_ptr<ServerState> state_;
  std::shared_ptr<Router> router_;
  std::unique_ptr<HttpHost> host_;
  std::unique_ptr<HttpIo> io_;  // io_context, acceptor, connections; outlives the pool
  std::unique_ptr<HandlerPool> pool_;
  std::atomic<bool> stopped_{false};
  int port_ = 0;
};

}  // namespace kiln::server
