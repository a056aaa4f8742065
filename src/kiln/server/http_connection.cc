#include "kiln/server/http_connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>
#include <cerrno>
#include <future>

#include "kiln/base/log.h"
#include "kiln/server/client_watch.h"
#include "kiln/server/http_framing.h"
#include "kiln/server/http_wire.h"
#include "kiln/server/router.h"

namespace kiln::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

HttpRequest to_request(const http::request<http::string_body>& msg) {
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  req.path = decoded_path(std::string_view(msg.target().data(), msg.target().size()));
  for (const auto& field : msg) {
    req.headers.add(std::string(field.name_string()), std::string(field.value()));
  }
  return req;
}

// Methods whose routes read a body; a body sent with another method is read (the framing
// says where the next request starts) but the connection closes after the answer, as a
// client sending one is not a client to trust with a kept connection.
bool route_reads_body(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

constexpr uint64_t kDirectBodyRead = 256u << 10;

bool silent_read_error(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
         ec == net::error::operation_aborted || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == http::error::partial_message;
}

}  // namespace

HttpConnection::HttpConnection(tcp::socket socket, RequestHost& host, HandlerPool& pool,
                               const ConnectionLimits& limits)
    : stream_(std::move(socket)), host_(host), pool_(pool), limits_(limits) {
  fd_ = stream_.socket().native_handle();
}

HttpConnection::~HttpConnection() = default;

void HttpConnection::start() {
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_header(); });
}

void HttpConnection::close() {
  net::post(stream_.get_executor(), [self = shared_from_this()] { self->close_now(); });
}

void HttpConnection::close_unless_handling() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->phase_ == Phase::Header || self->phase_ == Phase::Body) self->close_now();
  });
}

bool HttpConnection::peer_gone() {
  std::lock_guard lock(fd_mu_);
  if (fd_ < 0) return true;
  char byte = 0;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;  // the client closed its side
  if (n > 0) return false;  // a pipelined request waits: the client is there
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

void HttpConnection::read_header() {
  if (phase_ == Phase::Closed) return;
  if (host_.draining()) {
    close_now();
    return;
  }
  phase_ = Phase::Header;
  close_after_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
  parser_->body_limit(limits_.max_body_bytes);
  stream_.expires_after(limits_.header_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void HttpConnection::on_header(beast::error_code ec) {
  if (ec) {
    fail_read(ec);
    return;
  }
  req_ = to_request(parser_->get());
  if (req_.path.empty()) {
    HttpResponse res;
    set_error(res, 400, "malformed request target: '" + req_.target + "'");
    respond_now(std::move(res), true);
    return;
  }
  HttpResponse res;
  if (host_.answer_before_body(req_, res)) {
    // Whatever body was announced stays unread: the connection cannot carry another request.
    const bool closing = declares_body(req_) || res.headers.get("Connection") == "close";
    respond_now(std::move(res), closing);
    return;
  }
  close_after_ = declares_body(req_) && !route_reads_body(req_.method);
  // A client that asked for 100 Continue waits for it before sending the body (expectation
  // values are case-insensitive, RFC 9110 §10.1.1). A request with no body to send (its head
  // already complete) is answered without it.
  if (beast::iequals(req_.headers.get("Expect"), "100-continue") && !parser_->is_done()) {
    auto interim = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    net::async_write(stream_, net::buffer(*interim),
                     [self = shared_from_this(), interim](beast::error_code wec, size_t) {
                       if (wec) {
                         self->close_now();
                         return;
                       }
                       self->read_body();
                     });
    return;
  }
  read_body();
}

void HttpConnection::read_body() {
  phase_ = Phase::Body;
  if (parser_->is_done()) {
    on_body({});
    return;
  }
  stream_.expires_after(limits_.body_timeout);
  const auto length = parser_->content_length();
  if (length && *length > kDirectBodyRead) {
    // Beast reads a body through its buffer 64 KiB at a time, one trip through the I/O thread
    // each; a large declared body (a 10 MB prompt) is read straight into its string instead, as
    // much per read as the socket holds. (The header already passed the body limit.)
    auto& msg = parser_->get();
    keep_alive_ = msg.keep_alive();
    http_1_0_ = msg.version() == 10;
    parser_.reset();
    auto body = std::make_shared<std::string>(static_cast<size_t>(*length), '\0');
    const size_t buffered = std::min(buffer_.size(), body->size());
    net::buffer_copy(net::buffer(*body), buffer_.data(), buffered);
    buffer_.consume(buffered);
    net::async_read(stream_, net::buffer(body->data() + buffered, body->size() - buffered),
                    [self = shared_from_this(), body](beast::error_code ec, size_t) {
                      if (ec) {
                        self->fail_read(ec == net::error::eof
                                            ? beast::error_code(http::error::partial_message)
                                            : ec);
                        return;
                      }
                      self->req_.body = std::move(*body);
                      self->dispatch();
                    });
    return;
  }
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void HttpConnection::on_body(beast::error_code ec) {
  if (ec) {
    fail_read(ec);
    return;
  }
  auto& msg = parser_->get();
  req_.body = std::move(msg.body());
  keep_alive_ = msg.keep_alive();
  http_1_0_ = msg.version() == 10;
  parser_.reset();
  dispatch();
}

void HttpConnection::fail_read(beast::error_code ec) {
  if (phase_ == Phase::Closed) return;
  if (silent_read_error(ec)) {
    close_now();  // the client left, or was too slow: nobody to answer
    return;
  }
  HttpResponse res;
  if (ec == http::error::body_limit) {
    set_error(res, 413, "the request body is larger than the server's limit");
  } else if (ec == http::error::header_limit) {
    set_error(res, 431, "the request header is larger than the server's limit");
  } else {
    set_error(res, 400, "malformed HTTP request: " + ec.message());
  }
  respond_now(std::move(res), true);
}

void HttpConnection::dispatch() {
  phase_ = Phase::Handling;
  stream_.expires_never();
  if (host_.answers_at_once(req_)) {
    handle_at_once();
    return;
  }
  host_.count_in_flight(+1);
  auto self = shared_from_this();
  if (!pool_.submit([self, req = std::move(req_)] { self->run_handler(req); })) {
    host_.count_in_flight(-1);
    close_now();
  }
}

void HttpConnection::run_handler(const HttpRequest& req) {
  bool closing = !keep_alive_ || close_after_;
  {
    HttpResponse res;
    {
      ClientWatch::Scope watch([this] { return peer_gone(); });
      host_.handle(req, res);
    }
    host_.before_write(req, res);
    closing = closing || host_.draining() || res.headers.get("Connection") == "close";
    if (!write_response(req, res, closing)) closing = true;
    // `res` goes here, and with it a stream's state (a job never streamed is cancelled).
  }
  host_.count_in_flight(-1);
  net::post(stream_.get_executor(),
            [self = shared_from_this(), closing] { self->after_response(closing); });
}

bool HttpConnection::write_response(const HttpRequest& req, HttpResponse& res, bool closing) {
  const bool head_only = req.method == "HEAD";
  const bool ka_1_0 = http_1_0_ && !closing;
  if (!res.producer) {
    std::string bytes = response_head(res, false, closing, ka_1_0);
    if (!head_only) bytes += res.body;
    return write_blocking(std::move(bytes));
  }
  // A streamed body (SSE): every piece the producer writes goes out as its own chunk at once,
  // so each event reaches the client when it is produced.
  if (!write_blocking(response_head(res, true, closing, ka_1_0))) return false;
  bool ok = true;
  const BodyWriter write = [&](std::string_view piece) {
    if (piece.empty() || !ok) return ok;  // an empty chunk would end the body
    ok = write_blocking(chunk(piece));
    return ok;
  };
  const bool complete = res.producer(write);
  return ok && complete && write_blocking(std::string(kLastChunk));
}

bool HttpConnection::write_blocking(std::string bytes) {
  auto done = std::make_shared<std::promise<bool>>();
  auto result = done->get_future();
  auto data = std::make_shared<std::string>(std::move(bytes));
  net::post(stream_.get_executor(), [self = shared_from_this(), data, done] {
    if (self->phase_ == Phase::Closed) {
      done->set_value(false);
      return;
    }
    self->stream_.expires_after(self->limits_.write_timeout);
    net::async_write(self->stream_, net::buffer(*data),
                     [self, data, done](beast::error_code ec, size_t) {
                       self->stream_.expires_never();
                       done->set_value(!ec);
                     });
  });
  try {
    return result.get();
  } catch (const std::future_error&) {
    return false;  // the I/O side was torn down with the write pending
  }
}

void HttpConnection::handle_at_once() {
  HttpResponse res;
  host_.handle(req_, res);
  const bool closing =
      !keep_alive_ || close_after_ || host_.draining() || res.headers.get("Connection") == "close";
  respond_now(std::move(res), closing, http_1_0_ && !closing);
}

void HttpConnection::respond_now(HttpResponse res, bool closing, bool keep_alive_1_0) {
  host_.before_write(req_, res);
  phase_ = Phase::Handling;
  auto bytes = std::make_shared<std::string>(response_head(res, false, closing, keep_alive_1_0));
  if (req_.method != "HEAD") *bytes += res.body;
  stream_.expires_after(limits_.write_timeout);
  net::async_write(stream_, net::buffer(*bytes),
                   [self = shared_from_this(), bytes, closing](beast::error_code ec, size_t) {
                     self->stream_.expires_never();
                     self->after_response(closing || ec);
                   });
}

void HttpConnection::after_response(bool closing) {
  if (phase_ == Phase::Closed) return;
  if (closing) {
    lingering_close();
    return;
  }
  read_header();
}

// Closing a socket with unread request bytes makes the kernel send a reset, which can destroy
// the response before the client reads it. So the server ends its side, then reads and drops
// what the client still sends, for a bounded time, before closing.
void HttpConnection::lingering_close() {
  phase_ = Phase::Closed;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) {
    close_now();
    return;
  }
  discard_until_eof(std::make_shared<std::string>(4096, '\0'),
                    std::chrono::steady_clock::now() + std::chrono::seconds(2));
}

void HttpConnection::discard_until_eof(std::shared_ptr<std::string> sink,
                                       std::chrono::steady_clock::time_point deadline) {
  stream_.expires_at(deadline);
  stream_.async_read_some(
      net::buffer(sink->data(), sink->size()),
      [self = shared_from_this(), sink, deadline](beast::error_code ec, size_t) {
        if (ec) {
          self->close_now();
          return;
        }
        self->discard_until_eof(sink, deadline);
      });
}

void HttpConnection::close_now() {
  phase_ = Phase::Closed;
  std::lock_guard lock(fd_mu_);
  if (fd_ < 0) return;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
  fd_ = -1;
}

}  // namespace kiln::server
