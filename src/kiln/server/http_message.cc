#include "kiln/server/http_message.h"

#include <algorithm>
#include <iterator>

namespace kiln::server {

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool has_line_break(const std::string& s) { return s.find_first_of("\r\n") != std::string::npos; }

}  // namespace

bool HeaderNameLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](char x, char y) { return lower(x) < lower(y); });
}

HttpHeaders::HttpHeaders(std::initializer_list<std::pair<std::string, std::string>> fields) {
  for (const auto& [name, value] : fields) add(name, value);
}

std::string HttpHeaders::get(std::string_view name, size_t index) const {
  auto [first, last] = fields_.equal_range(name);
  if (static_cast<size_t>(std::distance(first, last)) <= index) return {};
  return std::next(first, static_cast<std::ptrdiff_t>(index))->second;
}

size_t HttpHeaders::count(std::string_view name) const {
  auto [first, last] = fields_.equal_range(name);
  return static_cast<size_t>(std::distance(first, last));
}

void HttpHeaders::set(const std::string& name, const std::string& value) {
  if (has_line_break(name) || has_line_break(value)) return;
  erase(name);
  fields_.emplace(name, value);
}

void HttpHeaders::add(const std::string& name, const std::string& value) {
  if (has_line_break(name) || has_line_break(value)) return;
  fields_.emplace(name, value);
}

void HttpHeaders::erase(std::string_view name) {
  auto [first, last] = fields_.equal_range(name);
  fields_.erase(first, last);
}

void HttpResponse::set_content(std::string content, const std::string& content_type) {
  body = std::move(content);
  headers.set("Content-Type", content_type);
}

void HttpResponse::set_producer(const std::string& content_type, BodyProducer body_producer) {
  producer = std::move(body_producer);
  headers.set("Content-Type", content_type);
}

}  // namespace kiln::server
