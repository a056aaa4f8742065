#include "kiln/server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/server/api_key.h"
#include "kiln/server/cors.h"
#include "kiln/server/http_error.h"
#include "kiln/server/http_framing.h"
#include "kiln/server/native_routes.h"
#include "kiln/server/openai_routes.h"
#include "kiln/server/router.h"

namespace kiln::server {

HttpServer::HttpServer(GenerationBackend& backend, const TextCodec& codec, ModelCard model,
                       ServerOptions options)
    : state_(std::make_unique<ServerState>(backend, codec, std::move(model), std::move(options))),
      http_(std::make_unique<httplib::Server>()) {
  // A client that disconnects mid-stream would otherwise kill the process with SIGPIPE on the
  // next write; ignoring it turns that into a failed write, which cancels the request.
  std::signal(SIGPIPE, SIG_IGN);

  ServerState& st = *state_;
  const ServerOptions& opt = st.options;
  int workers = opt.http_workers > 0 ? opt.http_workers : 2 * opt.max_n + 64;
  http_->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  http_->set_payload_max_length(opt.max_body_bytes);
  http_->set_keep_alive_max_count(1000);
  http_->set_keep_alive_timeout(5);
  http_->set_read_timeout(60);
  http_->set_write_timeout(60);
  http_->set_tcp_nodelay(true);  // small SSE chunks must not wait for Nagle
  // Our own options for the listening socket: SO_REUSEADDR only. cpp-httplib's defaults add
  // SO_REUSEPORT, with which a second server on the same port starts silently and the kernel
  // splits connections between the two. The socket is also remembered so bind() can raise its
  // accept backlog: cpp-httplib 0.11 listens with a backlog of 5, and a burst of clients (32
  // parallel GSM8K workers connecting at once while both cores decode) overflows it.
  http_->set_socket_options([this](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = sock;
  });

  auto router = std::make_shared<Router>(*http_, opt.max_body_bytes);
  add_native_routes(*router, st);
  add_openai_routes(*router, st);
  router->get("/metrics", [&st](const httplib::Request&, httplib::Response& res) {
    res.set_content(st.metrics->render(st.backend.stats()), "text/plain; version=0.0.4");
  });

  // Before httplib reads a body: framing it cannot be trusted with, CORS preflights (never
  // authenticated), the API key, and bodiless POSTs that httplib would otherwise wait on.
  // Whatever is answered here leaves a declared body unread, so it closes the connection.
  http_->set_pre_routing_handler(
      [&st, router](const httplib::Request& req, httplib::Response& res) {
        using R = httplib::Server::HandlerResponse;
        if (std::string problem = framing_problem(req); !problem.empty()) {
          set_error(res, 400, problem);
          close_after_response(res);
          return R::Handled;
        }
        if (req.method == "OPTIONS") {
          answer_preflight(*router, req, res, st.options.cors_allow_origin);
          if (declares_body(req)) close_after_response(res);
          return R::Handled;
        }
        if (!st.options.api_key.empty() && req.path != "/health" &&
            !bearer_matches(req.get_header_value("Authorization"), st.options.api_key)) {
          res.set_header("WWW-Authenticate", "Bearer");
          set_error(res, 401, "missing or wrong API key (send Authorization: Bearer <key>)");
          if (declares_body(req)) close_after_response(res);
          return R::Handled;
        }
        if (has_no_body(req)) {
          router->dispatch(req, res);
          return R::Handled;
        }
        return R::Unhandled;
      });
  // Responses httplib produced itself get a JSON body. No route (404) or a path that exists
  // under another method (405) come after the body was read; every other error of httplib's
  // own (a malformed request line or header, 413, 414, an unsupported Content-Encoding, a body
  // cut short) may leave bytes of the request on the connection, so it is closed.
  httplib::Server::HandlerWithResponse on_error = [router](const httplib::Request& req,
                                                           httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404) {
      router->set_no_route_error(req, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (res.status == 413) {
      set_error(res, 413, "the request body is larger than the server's limit");
    } else if (res.status == 400) {
      set_error(res, 400, "malformed HTTP request");
    } else {
      set_error(res, res.status, "HTTP error " + std::to_string(res.status));
    }
    close_after_response(res);
    return httplib::Server::HandlerResponse::Handled;
  };
  http_->set_error_handler(std::move(on_error));
  // The last hook before the status line goes out: CORS for the chosen origin, and the
  // connection closes when the request's body may be unread (see http_framing.h).
  http_->set_post_routing_handler([&st](const httplib::Request& req, httplib::Response& res) {
    if (!st.options.cors_allow_origin.empty() && req.method != "OPTIONS") {
      res.set_header("Access-Control-Allow-Origin", st.options.cors_allow_origin);
      if (st.options.cors_allow_origin != "*") res.set_header("Vary", "Origin");
    }
    end_marked_connection(req, res);
  });
  http_->set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        KILN_LOG_ERROR("{} {}: {}", req.method, req.path, what);
        set_error(res, 500, "internal error: " + what);
      });
  http_->set_logger([&st](const httplib::Request& req, const httplib::Response& res) {
    st.metrics->http_request(res.status);
    KILN_LOG_DEBUG("{} {} -> {}", req.method, req.path, res.status);
  });
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const auto& o = state_->options;
  if (o.port == 0) {
    port_ = http_->bind_to_any_port(o.host);
    if (port_ < 0) fail("cannot bind {}: no free port", o.host);
  } else {
    if (!http_->bind_to_port(o.host, o.port)) {
      fail("cannot bind {}:{} (address in use or not local)", o.host, o.port);
    }
    port_ = o.port;
  }
  if (listen_socket_ >= 0 && ::listen(listen_socket_, SOMAXCONN) != 0) {
    KILN_LOG_WARN("could not raise the accept backlog: {}", std::strerror(errno));
  }
  return port_;
}

void HttpServer::serve() { http_->listen_after_bind(); }

void HttpServer::stop() {
  state_->stopping = true;
  if (http_) http_->stop();
}

bool HttpServer::wait_idle(std::chrono::milliseconds max_wait) {
  auto deadline = std::chrono::steady_clock::now() + max_wait;
  while (state_->active_generations.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace kiln::server
