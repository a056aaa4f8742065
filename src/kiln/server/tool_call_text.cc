#include "kiln/server/tool_call_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <random>

#include "kiln/base/bounded_json.h"

namespace kiln::server::tool_text {

size_t partial_tag_at_end(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

std::string call_id() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mu);
  return fmt::format("call_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

size_t match_header(std::string_view s, std::string_view args_key, std::string& name) {
  size_t i = 0;
  auto space = [&] {
    while (i < s.size() && is_space(s[i])) ++i;
    return i < s.size();
  };
  auto literal = [&](std::string_view lit) -> int {  // 1 matched, 0 mismatch, -1 more needed
    for (char c : lit) {
      if (i == s.size()) return -1;
      if (s[i++] != c) return 0;
    }
    return 1;
  };
  for (std::string_view lit : {std::string_view("{"), std::string_view("\"name\""),
                               std::string_view(":"), std::string_view("\"")}) {
    if (!space()) return kMore;
    if (int r = literal(lit); r <= 0) return r < 0 ? kMore : 0;
  }
  name.clear();
  for (;; ++i) {  // the name: plain characters only (function names need no escapes)
    if (i == s.size()) return kMore;
    if (s[i] == '"') break;
    if (s[i] == '\\' || static_cast<unsigned char>(s[i]) < 0x20) return 0;
    name += s[i];
  }
  ++i;
  // `, "<args_key>" :`, whitespace allowed between the tokens but not inside the key's quotes.
  const std::string_view q = "\"";
  const std::string_view tokens[3][3] = {{",", "", ""}, {q, args_key, q}, {":", "", ""}};
  for (const auto& token : tokens) {
    if (!space()) return kMore;
    for (std::string_view lit : token) {
      if (int r = literal(lit); r <= 0) return r < 0 ? kMore : 0;
    }
  }
  if (!space()) return kMore;
  return i;
}

bool is_call_object(const nlohmann::ordered_json& value, std::string_view args_key) {
  const std::string key(args_key);
  return !value.is_discarded() && value.is_object() && value.size() == 2 &&
         value.contains("name") && value["name"].is_string() && value.contains(key);
}

nlohmann::ordered_json parse_model_json(std::string_view text) {
  try {
    return parse_ordered_json_bounded(text);
  } catch (const JsonTooDeep&) {
    return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  }
}

}  // namespace kiln::server::tool_text
