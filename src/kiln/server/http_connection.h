// One client connection on the event-driven transport (Boost.Beast over Asio). Everything that
// waits on the client runs asynchronously on the I/O threads: the request header (with a size
// limit and a deadline), the body (a size limit, 413, and its own deadline), keep-alive, and
// pipelined requests, which are read one after the other from the same buffer and so answered
// in order. A complete request goes to a handler thread (HandlerPool), which builds the
// response and writes it through the connection, blocking only itself (backpressure for
// streams). An idle or slow connection therefore holds no thread at all.
#pragma once
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "kiln/server/handler_pool.h"
#include "kiln/server/http_message.h"

namespace kiln::server {

struct ConnectionLimits {
  size_t max_header_bytes = 64u << 10;  // request line and headers; larger: 431
  size_t max_body_bytes = 16u << 20;    // larger: 413 (chunked bodies included)
  // From the moment the server waits for a request until its whole header is in: bounds both
  // an idle keep-alive connection and one that trickles its header (slowloris).
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{60000};   // the whole body, once the header is in
  std::chrono::milliseconds write_timeout{60000};  // each write of the response
};

// What a connection asks of the server.
class RequestHost {
 public:
  virtual ~RequestHost() = default;
  // On an I/O thread once the header is read (req.body is empty): true when `res` answers the
  // request without reading its body (a CORS preflight, a 401). Must not block.
  virtual bool answer_before_body(const HttpRequest& req, HttpResponse& res) = 0;
  // On a handler thread: the response to a complete request.
  virtual void handle(const HttpRequest& req, HttpResponse& res) = 0;
  // True when handle() answers `req` without blocking (a health check, metrics): it then runs
  // on the I/O thread, so it answers even while every handler thread is busy.
  virtual bool answers_at_once(const HttpRequest& req) const = 0;
  // Just before any response is written (those the transport makes itself included).
  virtual void before_write(const HttpRequest& req, HttpResponse& res) = 0;
  // A request was handed to a handler thread (+1) / its response is written or abandoned (-1).
  virtual void count_in_flight(int delta) = 0;
  // True once the server drains for shutdown: responses close their connection.
  virtual bool draining() const = 0;
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(boost::asio::ip::tcp::socket socket, RequestHost& host, HandlerPool& pool,
                 const ConnectionLimits& limits);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  void start();
  // From any thread: closes at once (pending reads and writes fail).
  void close();
  // From any thread: closes when the connection is not in the middle of a request the server
  // accepted (waiting for a header or reading a body); one being handled finishes first.
  void close_unless_handling();
  // From any thread: whether the client has closed or reset the connection. Used while a
  // handler runs, when the transport is not reading the socket.
  bool peer_gone();

 private:
  enum class Phase { Header, Body, Handling, Closed };
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

  void read_header();
  void on_header(boost::beast::error_code ec);
  void read_body();
  void on_body(boost::beast::error_code ec);
  void dispatch();
  void run_handler(const HttpRequest& req);  // handler thread
  bool write_response(const HttpRequest& req, HttpResponse& res, bool closing);
  bool write_blocking(std::string bytes);  // handler thread: through the I/O strand
  // I/O thread, no handler thread. keep_alive_1_0: an HTTP/1.0 client asked to keep the
  // connection and it stays open.
  void respond_now(HttpResponse res, bool closing, bool keep_alive_1_0 = false);
  void handle_at_once();  // I/O thread, a quick route
  void after_response(bool closing);
  void fail_read(boost::beast::error_code ec);
  void lingering_close();
  void discard_until_eof(std::shared_ptr<std::string> sink,
                         std::chrono::steady_clock::time_point deadline);
  void close_now();

  boost::beast::tcp_stream stream_;
  RequestHost& host_;
  HandlerPool& pool_;
  const ConnectionLimits limits_;
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  HttpRequest req_;
  Phase phase_ = Phase::Header;  // I/O strand only
  bool close_after_ = false;     // the request's body is not one its route reads
  bool keep_alive_ = true;
  bool http_1_0_ = false;
  std::mutex fd_mu_;  // peer_gone() from a handler thread vs closing on the strand
  int fd_ = -1;       // -1 once closed
};

}  // namespace kiln::server
