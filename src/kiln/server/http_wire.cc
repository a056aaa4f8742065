#include "kiln/server/http_wire.h"

// status.hpp is not self-contained in Boost 1.74 (it needs <ostream>); fields.hpp brings it.
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/status.hpp>
#include <cstdio>

namespace kiln::server {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string response_head(const HttpResponse& res, bool chunked, bool close, bool keep_alive_1_0) {
  namespace http = boost::beast::http;
  const auto reason = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(res.status)));
  std::string out = "HTTP/1.1 " + std::to_string(res.status) + " ";
  out.append(reason.data(), reason.size());
  out += "\r\n";
  for (const auto& [name, value] : res.headers) {
    // Framing is the transport's: a route never sets these, and a stale copy must not go out.
    if (name == "Content-Length" || name == "Transfer-Encoding" || name == "Connection") continue;
    out += name + ": " + value + "\r\n";
  }
  if (close) {
    out += "Connection: close\r\n";
  } else if (keep_alive_1_0) {
    out += "Connection: keep-alive\r\n";
  }
  if (chunked) {
    out += "Transfer-Encoding: chunked\r\n";
  } else if (res.status != 304) {
    // A 304 has no body, and a Content-Length on it would claim the length of the 200 it
    // stands for (RFC 9110 §8.6), so none is sent.
    out += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  }
  out += "\r\n";
  return out;
}

std::string chunk(std::string_view data) {
  char size[24];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out(size);
  out.append(data);
  out += "\r\n";
  return out;
}

std::string decoded_path(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  if (path.empty() || path[0] != '/') return {};
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') {
      out += path[i];
      continue;
    }
    if (i + 2 >= path.size()) return {};
    const int hi = hex_value(path[i + 1]), lo = hex_value(path[i + 2]);
    if (hi < 0 || lo < 0) return {};
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace kiln::server
