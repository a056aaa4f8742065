#include "kiln/server/http_framing.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace kiln::server {

namespace {

bool is_decimal(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string trimmed_lower(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  s = s.substr(b, s.find_last_not_of(" \t") - b + 1);
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::vector<std::string> transfer_codings(const HttpRequest& req) {
  std::vector<std::string> out;
  const size_t fields = req.headers.count("Transfer-Encoding");
  for (size_t i = 0; i < fields; ++i) {
    const std::string value = req.headers.get("Transfer-Encoding", i);
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view element = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      // A coding may carry parameters ("gzip;q=1"): only its name decides.
      std::string name = trimmed_lower(element.substr(0, element.find(';')));
      if (!name.empty()) out.push_back(std::move(name));
    }
  }
  return out;
}

std::string unsupported_transfer_coding(const HttpRequest& req) {
  for (const std::string& coding : transfer_codings(req)) {
    if (coding != "chunked") return coding;
  }
  return {};
}

bool declares_body(const HttpRequest& req) {
  if (req.headers.has("Transfer-Encoding")) return true;
  if (!req.headers.has("Content-Length")) return false;
  const std::string len = req.headers.get("Content-Length");
  return len.find_first_not_of('0') != std::string::npos;  // "0", "00": no body
}

std::string framing_problem(const HttpRequest& req) {
  if (req.headers.has("Transfer-Encoding")) {
    const std::vector<std::string> codings = transfer_codings(req);
    if (codings.empty() || codings.back() != "chunked") {
      return "the request's Transfer-Encoding does not end with chunked";
    }
    if (std::count(codings.begin(), codings.end(), "chunked") > 1) {
      return "the request's Transfer-Encoding applies chunked more than once";
    }
  }
  const size_t lengths = req.headers.count("Content-Length");
  if (lengths == 0) return {};
  if (req.headers.has("Transfer-Encoding")) {
    return "the request has both Content-Length and Transfer-Encoding";
  }
  const std::string first = req.headers.get("Content-Length");
  for (size_t i = 0; i < lengths; ++i) {
    const std::string v = req.headers.get("Content-Length", i);
    if (!is_decimal(v)) return "the request's Content-Length is not a number: '" + v + "'";
    if (v != first) return "the request has several Content-Length values that disagree";
  }
  return {};
}

void close_after_response(HttpResponse& res) {
  res.headers.set("Connection", "close");  // one header, however many times a response is marked
}

}  // namespace kiln::server
