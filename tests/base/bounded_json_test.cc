// The nesting limit on untrusted JSON: values up to kMaxInputNesting levels parse as nlohmann
// parses them, one level more is refused before anything deeper is built, and depths that
// used to overflow the stack downstream (30,000, 100,000) are refused the same way.
#include "kiln/base/bounded_json.h"

#include <gtest/gtest.h>

#include <string>

#include "kiln/base/input_limits.h"

namespace kiln {
namespace {

std::string arrays(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string objects(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"k\":";
  s += "1";
  s += std::string(depth, '}');
  return s;
}

TEST(BoundedJson, ParsesUpToTheLimitAsNlohmannDoes) {
  for (const std::string& text : {arrays(kMaxInputNesting), objects(kMaxInputNesting),
                                  std::string(R"({"a": [1, {"b": null}], "c": "x"})")}) {
    EXPECT_EQ(parse_json_bounded(text), nlohmann::json::parse(text));
    EXPECT_EQ(parse_ordered_json_bounded(text), nlohmann::ordered_json::parse(text));
  }
}

TEST(BoundedJson, RefusesOneLevelMoreAndFarDeeper) {
  for (int depth : {kMaxInputNesting + 1, 10'000, 30'000, 100'000}) {
    EXPECT_THROW(parse_json_bounded(arrays(depth)), JsonTooDeep) << depth;
    EXPECT_THROW(parse_ordered_json_bounded(objects(depth)), JsonTooDeep) << depth;
    // Deep inside an otherwise ordinary value, and in truncated text.
    EXPECT_THROW(parse_json_bounded("{\"x\": [1, " + arrays(depth) + "]}"), JsonTooDeep);
    EXPECT_THROW(parse_json_bounded(std::string(static_cast<size_t>(depth), '[')), JsonTooDeep);
  }
  try {
    parse_json_bounded(arrays(1000));
  } catch (const JsonTooDeep& e) {
    EXPECT_NE(std::string(e.what()).find("128 levels"), std::string::npos) << e.what();
  }
}

TEST(BoundedJson, InvalidTextIsDiscardedOrThrowsAsAsked) {
  EXPECT_TRUE(parse_json_bounded("{x").is_discarded());
  EXPECT_TRUE(parse_ordered_json_bounded("").is_discarded());
  EXPECT_THROW(parse_json_bounded("{x", /*allow_exceptions=*/true), nlohmann::json::parse_error);
}

}  // namespace
}  // namespace kiln
