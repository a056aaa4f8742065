#include "kiln/server/http_framing.h"

#include <memory>

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

bool httplib_reads_body(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

bool has_no_body(const httplib::Request& req) {
  return httplib_reads_body(req.method) && !req.has_header("Content-Length") &&
         !req.has_header("Transfer-Encoding");
}

std::string framing_problem(const httplib::Request& req) {
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

void end_marked_connection(const httplib::Request& req, httplib::Response& res) {
  const bool body_left_unread = declares_body(req) && !httplib_reads_body(req.method);
  if (body_left_unread) close_after_response(res);
  if (res.get_header_value("Connection") != "close") return;
  close_after_response(res);        // httplib may have added its own copy of the header
  res.headers.erase("Keep-Alive");  // httplib added it before this hook ran
  if (res.content_provider_) return;
  // httplib has already set Content-Length for the body; keep it (and the content type).
  auto body = std::make_shared<std::string>(std::move(res.body));
  res.body.clear();
  const std::string type = res.get_header_value("Content-Type");
  res.headers.erase("Content-Type");  // set_content_provider adds it again
  res.set_content_provider(type, [body](size_t, httplib::DataSink& sink) {
    if (!body->empty()) sink.write(body->data(), body->size());
    return false;  // the "failed" write is what makes httplib 0.11 close the connection
  });
  if (type.empty()) res.headers.erase("Content-Type");
}

}  // namespace kiln::server
