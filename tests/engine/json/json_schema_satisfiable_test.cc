// Schemas that no output can satisfy within what the decoder writes are refused when they
// compile, and those that compile leave no dead end: number bounds narrower than the finest
// fraction of 18 digits, and the shortest value a schema allows (json_min_bytes), which the
// server compares with the request's token budget.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "kiln/engine/json/json_matcher.h"
#include "kiln/engine/json/json_min_bytes.h"
#include "kiln/engine/json/json_schema.h"

namespace kiln::engine {
namespace {

std::shared_ptr<const JsonSchema> compile(const std::string& text) {
  return JsonSchema::compile(nlohmann::json::parse(text));
}

// Depth-first over every byte string the matcher accepts (number alphabet, at most 21 bytes):
// each accepted prefix either completes or takes another byte. Returns the completed values.
int explore(const std::shared_ptr<const JsonSchema>& s, const JsonMatchState& state,
            const std::string& text, int* visited) {
  if (++*visited > 200000) return 0;  // narrow bounds keep this small; a guard all the same
  int complete = json_complete(*s, state) ? 1 : 0;
  bool continues = false;
  for (char c : std::string("-0123456789.")) {
    JsonMatchState next = state;
    if (!json_feed(*s, next, static_cast<uint8_t>(c))) continue;
    continues = true;
    complete += explore(s, next, text + c, visited);
  }
  EXPECT_TRUE(complete > 0 || continues) << "dead end after '" << text << "'";
  return complete;
}

TEST(JsonSchemaSatisfiable, BoundsNarrowerThanEighteenDigitsAreRefused) {
  for (const char* bounds :
       {R"("exclusiveMinimum": 0, "maximum": 1e-320)", R"("minimum": 1e-19, "maximum": 9e-19)",
        R"("exclusiveMinimum": -1e-300, "exclusiveMaximum": 0)",
        R"("minimum": 5.0000000000000001e-25, "maximum": 6e-25)"}) {
    EXPECT_THROW(compile(std::string(R"({"type": "number", )") + bounds + "}"), JsonSchemaError)
        << bounds;
  }
}

TEST(JsonSchemaSatisfiable, NarrowBoundsThatHoldANumberHaveNoDeadEnd) {
  for (const char* bounds :
       {R"("minimum": 0.1, "maximum": 0.1)", R"("exclusiveMinimum": 0, "maximum": 1e-17)",
        R"("minimum": -1e-17, "exclusiveMaximum": 0)",
        R"("minimum": 5, "maximum": 5.000000000000001)",
        R"("exclusiveMinimum": 123456.5, "maximum": 123456.50000000001)",
        R"("minimum": 12.25, "maximum": 12.25)"}) {
    const auto s = compile(std::string(R"({"type": "number", )") + bounds + "}");
    int visited = 0;
    EXPECT_GT(explore(s, json_start(*s), "", &visited), 0) << bounds;
  }
}

TEST(JsonSchemaSatisfiable, ShortestValueBounds) {
  EXPECT_EQ(json_min_bytes(*compile(R"({"type": "string", "minLength": 1000000000})")),
            1000000002u);
  EXPECT_EQ(json_min_bytes(*compile(R"({"type": "boolean"})")), 4u);
  EXPECT_EQ(json_min_bytes(*compile(R"({"enum": ["abc", 12345]})")), 5u);
  EXPECT_EQ(json_min_bytes(*compile(R"({"type": "string", "pattern": "^a{7}$"})")), 9u);
  // [{"k":"xx"},...] three times: 2 + 3 * 10 + 2 commas.
  const auto items = compile(R"({"type": "array", "minItems": 3, "items": {"type": "object",
      "properties": {"k": {"type": "string", "minLength": 2}}, "required": ["k"],
      "additionalProperties": false}})");
  EXPECT_EQ(json_min_bytes(*items), 34u);
  // Arrays of arrays: the bound multiplies (and saturates instead of overflowing).
  EXPECT_GE(json_min_bytes(*compile(R"({"type": "array", "minItems": 1000000000, "items":
      {"type": "array", "minItems": 1000000000, "items": {"type": "string",
      "minLength": 1000000000}}})")),
            uint64_t{1} << 60);
  // A recursive schema that can stop is short; the bound is a lower bound, never above a real
  // value: {"next":null} is 13 bytes.
  const auto list = compile(R"({"$defs": {"n": {"type": "object", "properties": {"next":
      {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}}, "required": ["next"],
      "additionalProperties": false}}, "$ref": "#/$defs/n"})");
  EXPECT_LE(json_min_bytes(*list), 13u);
  EXPECT_GE(json_min_bytes(*list), 6u);
}

}  // namespace
}  // namespace kiln::engine
