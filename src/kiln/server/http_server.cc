#include "kiln/server/http_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <csignal>
#include <future>
#include <thread>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/server/api_key.h"
#include "kiln/server/cors.h"
#include "kiln/server/embedding_routes.h"
#include "kiln/server/handler_pool.h"
#include "kiln/server/http_connection.h"
#include "kiln/server/http_framing.h"
#include "kiln/server/native_routes.h"
#include "kiln/server/openai_routes.h"
#include "kiln/server/router.h"
#include "kiln/server/webui_routes.h"

namespace kiln::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// The server's side of every request: checks made before a body is read, routing, CORS and
// metrics on the way out, and the count of requests in flight.
class HttpHost final : public RequestHost {
 public:
  HttpHost(ServerState& state, const Router& router) : st_(state), router_(router) {}

  bool answer_before_body(const HttpRequest& req, HttpResponse& res) override {
    if (std::string problem = framing_problem(req); !problem.empty()) {
      set_error(res, 400, problem);
      close_after_response(res);
      return true;
    }
    if (std::string coding = unsupported_transfer_coding(req); !coding.empty()) {
      set_error(
          res, 501,
          "the request's transfer coding '" + coding + "' is not supported (only chunked is)");
      close_after_response(res);
      return true;
    }
    if (req.method == "OPTIONS") {
      answer_preflight(router_, req, res, st_.options.cors_allow_origin);
      return true;
    }
    if (!st_.options.api_key.empty() && req.path != "/health" &&
        !(st_.options.webui && is_webui_path(req.path)) &&
        !bearer_matches(req.headers.get("Authorization"), st_.options.api_key)) {
      res.headers.set("WWW-Authenticate", "Bearer");
      set_error(res, 401, "missing or wrong API key (send Authorization: Bearer <key>)");
      return true;
    }
    const std::string encoding = req.headers.get("Content-Encoding");
    if (!encoding.empty() && encoding != "identity") {
      set_error(res, 415, "the request's Content-Encoding is not supported");
      close_after_response(res);
      return true;
    }
    return false;
  }

  void handle(const HttpRequest& req, HttpResponse& res) override {
    try {
      router_.dispatch(req, res);  // route handlers turn their own exceptions into errors
    } catch (const std::exception& e) {
      KILN_LOG_ERROR("{} {}: {}", req.method, req.path, e.what());
      res = HttpResponse();
      set_error(res, 500, std::string("internal error: ") + e.what());
    }
  }

  bool answers_at_once(const HttpRequest& req) const override { return router_.is_quick(req); }

  void before_write(const HttpRequest& req, HttpResponse& res) override {
    if (!st_.options.cors_allow_origin.empty() && req.method != "OPTIONS") {
      res.headers.set("Access-Control-Allow-Origin", st_.options.cors_allow_origin);
      if (st_.options.cors_allow_origin != "*") res.headers.set("Vary", "Origin");
    }
    st_.metrics->http_request(res.status);
    KILN_LOG_DEBUG("{} {} -> {}", req.method, req.path, res.status);
  }

  void count_in_flight(int delta) override { in_flight_.fetch_add(delta); }
  bool draining() const override { return st_.draining.load(); }

  std::atomic<int> in_flight_{0};

 private:
  ServerState& st_;
  const Router& router_;
};

// The I/O side: one io_context run by the I/O threads, the listening socket, and the live
// connections (weakly: a connection lives as long as an operation or a handler holds it).
struct HttpIo {
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::steady_timer retry_accept{ioc};
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(ioc);
  std::atomic<bool> running{false};  // serve() is running the io_context
  std::mutex mu;
  std::vector<std::weak_ptr<HttpConnection>> connections;

  template <typename F>
  void for_each_connection(F f) {
    std::vector<std::shared_ptr<HttpConnection>> live;
    {
      std::lock_guard lock(mu);
      for (auto& w : connections) {
        if (auto c = w.lock()) live.push_back(std::move(c));
      }
    }
    for (auto& c : live) f(*c);
  }
  void add(const std::shared_ptr<HttpConnection>& c) {
    std::lock_guard lock(mu);
    std::erase_if(connections, [](const auto& w) { return w.expired(); });
    connections.push_back(c);
  }
};

namespace {

void accept_next(HttpIo& io, HttpHost& host, HandlerPool& pool, const ConnectionLimits& limits) {
  io.acceptor.async_accept(
      net::make_strand(io.ioc),
      [&io, &host, &pool, limits](boost::system::error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || !io.acceptor.is_open()) return;
        if (ec) {
          // Out of file descriptors, typically: try again shortly instead of spinning.
          KILN_LOG_WARN("accept failed: {}", ec.message());
          io.retry_accept.expires_after(std::chrono::milliseconds(50));
          io.retry_accept.async_wait([&io, &host, &pool, limits](boost::system::error_code) {
            if (io.acceptor.is_open()) accept_next(io, host, pool, limits);
          });
          return;
        }
        boost::system::error_code opt_ec;
        socket.set_option(tcp::no_delay(true), opt_ec);  // small SSE chunks must not wait
        auto c = std::make_shared<HttpConnection>(std::move(socket), host, pool, limits);
        io.add(c);
        c->start();
        accept_next(io, host, pool, limits);
      });
}

ConnectionLimits limits_of(const ServerOptions& o) {
  ConnectionLimits l;
  l.max_header_bytes = o.max_header_bytes;
  l.max_body_bytes = o.max_body_bytes;
  l.header_timeout = o.header_timeout;
  l.body_timeout = o.body_timeout;
  l.write_timeout = o.write_timeout;
  return l;
}

}  // namespace

HttpServer::HttpServer(GenerationBackend& backend, const TextCodec& codec, ModelCard model,
                       ServerOptions options)
    : state_(std::make_unique<ServerState>(backend, codec, std::move(model), std::move(options))),
      router_(std::make_shared<Router>()),
      io_(std::make_unique<HttpIo>()) {
  // A client that disconnects mid-stream would otherwise kill the process with SIGPIPE on the
  // next write; ignoring it turns that into a failed write, which cancels the request.
  std::signal(SIGPIPE, SIG_IGN);
  ServerState& st = *state_;
  const ServerOptions& opt = st.options;
  const int workers = opt.http_workers > 0 ? opt.http_workers : 2 * opt.max_n + 64;
  pool_ = std::make_unique<HandlerPool>(static_cast<size_t>(workers));
  add_native_routes(*router_, st);
  add_openai_routes(*router_, st);
  add_embedding_routes(*router_, st);
  router_->get_quick("/metrics", [&st](const HttpRequest&, HttpResponse& res) {
    res.set_content(st.metrics->render(st.backend.stats()), "text/plain; version=0.0.4");
  });
  add_webui_routes(*router_, opt.webui);
  host_ = std::make_unique<HttpHost>(st, *router_);
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const auto& o = state_->options;
  boost::system::error_code ec;
  tcp::resolver resolver(io_->ioc);
  auto endpoints = resolver.resolve(o.host, std::to_string(o.port), ec);
  if (ec || endpoints.empty()) fail("cannot bind {}:{}: {}", o.host, o.port, ec.message());
  const tcp::endpoint ep = endpoints.begin()->endpoint();
  auto& acc = io_->acceptor;
  acc.open(ep.protocol(), ec);
  // SO_REUSEADDR only (a restarted server binds at once); never SO_REUSEPORT, with which a
  // second server on the same port would start silently and split the connections.
  if (!ec) acc.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(ep, ec);
  if (!ec) acc.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    acc.close();
    fail("cannot bind {}:{} (address in use or not local): {}", o.host, o.port, ec.message());
  }
  port_ = acc.local_endpoint().port();
  return port_;
}

void HttpServer::serve() {
  const auto limits = limits_of(state_->options);
  net::post(io_->ioc, [this, limits] { accept_next(*io_, *host_, *pool_, limits); });
  const int extra = std::max(0, state_->options.http_io_threads - 1);
  std::vector<std::thread> threads;
  io_->running = true;
  for (int i = 0; i < extra; ++i) threads.emplace_back([this] { io_->ioc.run(); });
  io_->ioc.run();
  for (auto& t : threads) t.join();
  io_->running = false;
}

void HttpServer::stop_accepting() {
  state_->draining = true;
  auto close_listener = [this] {
    boost::system::error_code ec;
    io_->acceptor.close(ec);
    io_->retry_accept.cancel();
  };
  if (!io_->running) {
    close_listener();
  } else {
    // The acceptor belongs to the I/O threads; once this returns, nothing more is accepted.
    auto closed = std::make_shared<std::promise<void>>();
    auto done = closed->get_future();
    net::post(io_->ioc, [close_listener, closed] {
      close_listener();
      closed->set_value();
    });
    done.wait_for(std::chrono::seconds(5));
  }
  io_->for_each_connection([](HttpConnection& c) { c.close_unless_handling(); });
}

void HttpServer::stop() {
  if (stopped_.exchange(true)) return;
  state_->stopping = true;
  stop_accepting();
  io_->for_each_connection([](HttpConnection& c) { c.close(); });
  pool_->shutdown();  // handlers end: their engine requests finished or their sockets closed
  io_->work.reset();
  io_->ioc.stop();
}

bool HttpServer::wait_requests_done(std::chrono::milliseconds max_wait) {
  auto deadline = std::chrono::steady_clock::now() + max_wait;
  while (host_->in_flight_.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

bool HttpServer::wait_idle(std::chrono::milliseconds max_wait) {
  auto deadline = std::chrono::steady_clock::now() + max_wait;
  while (state_->active_generations.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

int HttpServer::requests_in_flight() const { return host_->in_flight_.load(); }

size_t HttpServer::handler_threads() const { return pool_->threads(); }

}  // namespace kiln::server
