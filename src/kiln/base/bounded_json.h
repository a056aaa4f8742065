// JSON text from outside (request bodies, tool arguments, schemas sent as strings, a model's
// tool calls) parsed with the nesting limit of input_limits.h. nlohmann's parser keeps its own
// stack and copes with any depth, but everything downstream that walks the value recursively
// (its own dump and copy, kiln's JSON writers and schema compiler) would not: one 60 kB body
// nested 30,000 deep used to overflow the server's stack. Refusing at parse time bounds every
// later walk.
#pragma once
#include <nlohmann/json.hpp>
#include <string_view>

#include "kiln/base/error.h"

namespace kiln {

// A value nested deeper than kMaxInputNesting; what() says so and names the limit. Callers add
// the field it came from.
class JsonTooDeep : public Error {
 public:
  JsonTooDeep();
};

// As nlohmann's parse(text, nullptr, allow_exceptions): text that is not JSON gives a discarded
// value, or throws nlohmann::json::parse_error when allow_exceptions. Throws JsonTooDeep once
// objects and arrays open more than kMaxInputNesting levels deep (before building them).
nlohmann::json parse_json_bounded(std::string_view text, bool allow_exceptions = false);
nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text,
                                                  bool allow_exceptions = false);

}  // namespace kiln
