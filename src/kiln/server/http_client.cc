#include "kiln/server/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cstdint>
#include <limits>

#include "kiln/base/error.h"

namespace kiln::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

HttpUrl parse_http_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  KILN_CHECK(scheme_end != std::string::npos, "URL {} needs a scheme (http://...)", url);
  KILN_CHECK(url.compare(0, scheme_end, "http") == 0, "URL {}: only http:// is supported", url);
  const size_t authority = scheme_end + 3;
  const size_t path_start = url.find('/', authority);
  const std::string host_port = url.substr(authority, path_start - authority);
  HttpUrl out;
  // "[::1]:8000": the brackets keep an IPv6 address's colons apart from the port's.
  const size_t colon = host_port.rfind(':');
  const size_t bracket = host_port.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    out.host = host_port.substr(0, colon);
    out.port = host_port.substr(colon + 1);
  } else {
    out.host = host_port;
    out.port = "80";
  }
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  KILN_CHECK(!out.host.empty(), "URL {} names no host", url);
  KILN_CHECK(!out.port.empty() && out.port.find_first_not_of("0123456789") == std::string::npos,
             "URL {}: the port is not a number", url);
  if (path_start != std::string::npos) {
    out.prefix = url.substr(path_start);
    while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  }
  return out;
}

// One TCP connection and the I/O context that drives it. Asio's blocking calls cannot time
// out, so every step is an asynchronous operation run to completion on the calling thread,
// with a deadline.
struct HttpClient::Connection {
  net::io_context ioc;
  tcp::socket socket{ioc};
  beast::flat_buffer buffer;

  template <typename Start>
  beast::error_code run(std::chrono::milliseconds timeout, Start start) {
    beast::error_code result = net::error::would_block;
    ioc.restart();
    start([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc.run_for(timeout);
    if (!ioc.stopped()) {
      // The deadline passed: closing the socket aborts the operation, whose handler still
      // has to run before `result` goes out of scope.
      close();
      ioc.run();
      return beast::error::timeout;
    }
    return result;
  }

  void close() {
    beast::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    buffer.clear();
  }
};

namespace {

// The server closed a kept-alive connection before this request reached it (its idle timeout
// ran out between two requests): the request can go again on a new connection.
bool closed_while_idle(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe;
}

}  // namespace

HttpClient::HttpClient(std::string host, std::string port, HttpClientTimeouts timeouts)
    : host_(std::move(host)),
      port_(std::move(port)),
      timeouts_(timeouts),
      conn_(std::make_unique<Connection>()) {}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::send(const HttpRequest& req, const BodyWriter* on_body) {
  const bool reused = conn_->socket.is_open();
  bool retryable = false;
  try {
    return exchange(req, on_body, &retryable);
  } catch (const Error&) {
    if (!reused || !retryable) throw;
  }
  conn_->close();
  return exchange(req, on_body, &retryable);
}

HttpResponse HttpClient::exchange(const HttpRequest& req, const BodyWriter* on_body,
                                  bool* retryable) {
  Connection& c = *conn_;
  const std::string what = fmt::format("{} http://{}:{}{}", req.method, host_, port_, req.target);
  // Set when the exchange fails because the server had closed the connection before reading
  // the request: send() may then try once more on a new one.
  *retryable = false;
  if (!c.socket.is_open()) {
    tcp::resolver resolver(c.ioc);
    beast::error_code ec;
    const auto endpoints = resolver.resolve(host_, port_, ec);
    if (ec) fail("{}: cannot resolve {}: {}", what, host_, ec.message());
    ec = c.run(timeouts_.connect,
               [&](auto handler) { net::async_connect(c.socket, endpoints, std::move(handler)); });
    if (ec) {
      c.close();
      fail("{}: cannot connect to {}:{}: {}", what, host_, port_, ec.message());
    }
    c.socket.set_option(tcp::no_delay(true), ec);  // a request is one small write
  }

  http::request<http::string_body> msg;
  msg.version(11);
  msg.method_string(req.method);
  msg.target(req.target);
  for (const auto& [name, value] : req.headers) msg.insert(name, value);
  if (msg.find(http::field::host) == msg.end()) msg.set(http::field::host, host_ + ":" + port_);
  if (msg.find(http::field::user_agent) == msg.end()) {
    msg.set(http::field::user_agent, "kiln/" KILN_VERSION);
  }
  msg.body() = req.body;
  msg.prepare_payload();
  beast::error_code ec = c.run(
      timeouts_.io, [&](auto handler) { http::async_write(c.socket, msg, std::move(handler)); });
  if (ec) {
    *retryable = closed_while_idle(ec);
    c.close();
    fail("{}: sending the request: {}", what, ec.message());
  }

  http::response_parser<http::buffer_body> parser;
  parser.header_limit(64u << 10);
  // A reply is as long as the server makes it. (Not boost::none: Boost 1.74 compares a
  // Content-Length against the empty limit and refuses every such body.)
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (req.method == "HEAD") parser.skip(true);
  ec = c.run(timeouts_.io, [&](auto handler) {
    http::async_read_header(c.socket, c.buffer, parser, std::move(handler));
  });
  if (ec) {
    *retryable = !parser.got_some() && closed_while_idle(ec);
    c.close();
    fail("{}: no reply: {}", what, ec.message());
  }

  HttpResponse res;
  res.status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get()) {
    res.headers.add(std::string(field.name_string()), std::string(field.value()));
  }
  const bool streamed = on_body != nullptr && res.status / 100 == 2;
  char piece[16384];
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof(piece);
    ec = c.run(timeouts_.io, [&](auto handler) {
      http::async_read_some(c.socket, c.buffer, parser, std::move(handler));
    });
    if (ec == http::error::need_buffer) ec = {};  // `piece` is full: hand it on
    if (ec) {
      c.close();
      fail("{}: reading the reply: {}", what, ec.message());
    }
    const size_t n = sizeof(piece) - parser.get().body().size;
    if (n == 0) continue;
    if (!streamed) {
      res.body.append(piece, n);
    } else if (!(*on_body)(std::string_view(piece, n))) {
      c.close();  // the rest of the body is unread: the connection cannot carry another reply
      return res;
    }
  }
  if (!parser.get().keep_alive()) c.close();
  return res;
}

HttpResponse HttpClient::get(const std::string& target, const HttpHeaders& headers) {
  HttpRequest req;
  req.method = "GET";
  req.target = target;
  req.headers = headers;
  return send(req);
}

}  // namespace kiln::server
