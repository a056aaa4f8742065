// What the fuzz targets share. Each target feeds its input to one reader and accepts only the
// refusals that reader documents (kiln::Error, and the HTTP parsers' HttpError); any other
// exception escapes the target and terminates it, so libFuzzer reports it like a crash, as it
// does sanitizer reports and timeouts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/base/bounded_json.h"
#include "kiln/base/error.h"

namespace kiln::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input as JSON, or nullopt when it is not JSON or nests deeper than the input limit: the
// servers and loaders refuse such bytes before any reader sees them (base/bounded_json.h), so
// the readers are fuzzed with the documents they can receive.
inline std::optional<nlohmann::json> parse_json(const uint8_t* data, size_t size) {
  try {
    nlohmann::json j = parse_json_bounded(as_text(data, size));
    if (j.is_discarded()) return std::nullopt;
    return j;
  } catch (const JsonTooDeep&) {
    return std::nullopt;
  }
}

// Runs `body`, swallowing kiln::Error (bad input refused with a message).
template <typename F>
void refusing_bad_input(F&& body) {
  try {
    body();
  } catch (const Error&) {
  }
}

}  // namespace kiln::fuzz
