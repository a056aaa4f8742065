#include "kiln/base/bounded_json.h"

#include <fmt/format.h>

#include "kiln/base/input_limits.h"

namespace kiln {

JsonTooDeep::JsonTooDeep()
    : Error(fmt::format("nests objects and arrays more than {} levels deep (the limit)",
                        kMaxInputNesting)) {}

namespace {

template <typename Json>
Json parse_bounded(std::string_view text, bool allow_exceptions) {
  // The callback sees each object or array open with the number of containers already open
  // around it (0 at the top level); throwing stops the parser before it builds any deeper.
  const typename Json::parser_callback_t refuse_deep =
      [](int depth, typename Json::parse_event_t event, Json& /*parsed*/) {
        const bool opens =
            event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
        if (opens && depth >= kMaxInputNesting) throw JsonTooDeep();
        return true;
      };
  return Json::parse(text, refuse_deep, allow_exceptions);
}

}  // namespace

nlohmann::json parse_json_bounded(std::string_view text, bool allow_exceptions) {
  return parse_bounded<nlohmann::json>(text, allow_exceptions);
}

nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, bool allow_exceptions) {
  return parse_bounded<nlohmann::ordered_json>(text, allow_exceptions);
}

}  // namespace kiln
