#include "kiln/server/http_framing.h"

#include <algorithm>
#include <cctype>

namespace kiln::server {

namespace {

bool is_decimal(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

bool declares_body(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  if (!req.has_header("Content-Length")) return false;
  const std::string len = req.get_header_value("Content-Length");
  return len.find_first_not_of('0') != std::string::npos;  // "0", "00": no body
}

std::string framing_problem(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) {
    std::string te = req.get_header_value("Transfer-Encoding");
    std::transform(te.begin(), te.end(), te.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const size_t last = te.find_last_not_of(" \t");
    if (last == std::string::npos || last + 1 < 7 || te.compare(last + 1 - 7, 7, "chunked") != 0) {
      return "the request's Transfer-Encoding does not end with chunked";
    }
  }
  const size_t lengths = req.get_header_value_count("Content-Length");
  if (lengths == 0) return {};
  if (req.has_header("Transfer-Encoding")) {
    return "the request has both Content-Length and Transfer-Encoding";
  }
  const std::string first = req.get_header_value("Content-Length");
  for (size_t i = 0; i < lengths; ++i) {
    const std::string v = req.get_header_value("Content-Length", i);
    if (!is_decimal(v)) return "the request's Content-Length is not a number: '" + v + "'";
    if (v != first) return "the request has several Content-Length values that disagree";
  }
  return {};
}

void close_after_response(httplib::Response& res) {
  res.headers.erase("Connection");  // one header, however many times a response is marked
  res.set_header("Connection", "close");
}

}  // namespace kiln::server
