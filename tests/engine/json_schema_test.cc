// JSON-schema constraints: what each supported keyword lets through and refuses (as whole
// texts and as prefixes: a refused value must be refused at its first wrong byte, so that
// constrained decoding never walks into a dead end), and the errors for unsupported schemas.
#include "kiln/engine/json_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/engine/json_matcher.h"

namespace kiln::engine {
namespace {

using nlohmann::json;

std::shared_ptr<const JsonSchema> schema(const char* text) {
  return JsonSchema::compile(json::parse(text));
}

bool matches(const std::shared_ptr<const JsonSchema>& s, const std::string& text) {
  JsonMatcher m(s);
  return m.feed(text) && m.complete();
}

bool prefix_ok(const std::shared_ptr<const JsonSchema>& s, const std::string& text) {
  JsonMatcher m(s);
  return m.feed(text);
}

void expect_all(const std::shared_ptr<const JsonSchema>& s, const std::vector<std::string>& ok,
                const std::vector<std::string>& bad) {
  for (const auto& t : ok) EXPECT_TRUE(matches(s, t)) << t;
  for (const auto& t : bad) EXPECT_FALSE(matches(s, t)) << t;
}

TEST(JsonSchema, Types) {
  expect_all(schema(R"({"type": "integer"})"), {"0", "-7", "123"}, {"1.5", "1e3", "\"1\"", "true"});
  expect_all(schema(R"({"type": "number"})"), {"0", "1.5", "-2e-3"}, {"null", "[1]"});
  expect_all(schema(R"({"type": "string"})"), {"\"\"", "\"x\\n\""}, {"1", "{}"});
  expect_all(schema(R"({"type": "boolean"})"), {"true", "false"}, {"null", "0"});
  expect_all(schema(R"({"type": "null"})"), {"null"}, {"false"});
  expect_all(schema(R"({"type": ["string", "null"]})"), {"null", "\"a\""}, {"1", "true"});
  expect_all(schema(R"({"type": "array"})"), {"[]", "[1,\"a\",{}]"}, {"{}"});
  expect_all(schema(R"({"type": "object"})"), {"{}", R"({"x":[1]})"}, {"[]"});
  // Refused at the first byte.
  EXPECT_FALSE(prefix_ok(schema(R"({"type": "integer"})"), "1."));
  EXPECT_FALSE(prefix_ok(schema(R"({"type": "boolean"})"), "n"));
}

TEST(JsonSchema, PropertiesRequiredAndClosedObjects) {
  const auto s = schema(R"({"type": "object",
      "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                     "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["name", "age"], "additionalProperties": false})");
  expect_all(
      s,
      {R"({"name":"a","age":3})", R"({"age":3,"name":"a"})",
       R"({ "name" : "a" , "age" : 3 , "tags" : ["x"] })", R"({"tags":[],"age":1,"name":""})"},
      {R"({"name":"a"})", R"({})", R"({"name":"a","age":"3"})", R"({"name":"a","age":3,"other":1})",
       R"({"name":"a","name":"b","age":1})", R"({"name":"a","age":3,"tags":[1]})"});
  // Refused as early as possible: an unknown key at its first distinguishing byte, a used key
  // once it is spelled out, '}' while a required key is missing.
  EXPECT_FALSE(prefix_ok(s, R"({"x)"));
  EXPECT_TRUE(prefix_ok(s, R"({"na)"));
  EXPECT_FALSE(prefix_ok(s, R"({"name":"a","name)"));
  EXPECT_FALSE(prefix_ok(s, R"({"name":"a"})"));
  // All keys used: no comma.
  EXPECT_FALSE(prefix_ok(s, R"({"name":"a","age":1,"tags":[],)"));
}

TEST(JsonSchema, PropertiesWithoutAdditionalPropertiesOnlyGetTheListedKeys) {
  const auto s = schema(R"({"properties": {"a": {"type": "boolean"}}})");
  expect_all(s, {R"({"a":true})", "{}", "1", "\"x\""}, {R"({"b":1})", R"({"a":1})"});
  expect_all(schema(R"({"type": "object", "additionalProperties": false})"), {"{}"},
             {R"({"a":1})"});
}

TEST(JsonSchema, ItemsMinItemsMaxItems) {
  const auto s = schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1,
                            "maxItems": 3})");
  expect_all(s, {"[1]", "[1, 2, 3]"}, {"[]", "[1,2,3,4]", "[1.5]", "[\"a\"]"});
  EXPECT_FALSE(prefix_ok(s, "[]"));
  EXPECT_FALSE(prefix_ok(s, "[1,2,3,"));
}

// Length in characters: an escape, a \u surrogate pair and a multi-byte UTF-8 character each
// count one. The closing quote is refused before minLength, the next character at maxLength.
TEST(JsonSchema, MinLengthMaxLengthCountCharacters) {
  const auto s = schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  expect_all(
      s, {"\"ab\"", "\"abc\"", "\"\\n\\t\"", "\"\xC3\xA9\xE2\x82\xAC\"", "\"a\\uD83D\\uDE00b\""},
      {"\"\"", "\"a\"", "\"abcd\"", "\"\xC3\xA9\"", "\"\\uD83D\\uDE00\"", "\"\\n\\n\\n\\n\""});
  EXPECT_FALSE(prefix_ok(s, "\"a\""));             // refused at the quote, not later
  EXPECT_FALSE(prefix_ok(s, "\"abcd"));            // refused at the fourth character
  EXPECT_FALSE(prefix_ok(s, "\"abc\\"));           // an escape would be the fourth
  EXPECT_TRUE(prefix_ok(s, "\"a\\uD83D\\uDE00"));  // the low half is not a character
  // Keys and other strings of the document are not limited.
  const auto obj = schema(R"({"type": "object", "properties": {"code": {"type": "string",
                              "maxLength": 1}, "longer_name": {"type": "string"}}})");
  expect_all(obj, {"{\"code\":\"x\",\"longer_name\":\"any length at all\"}"},
             {"{\"code\":\"xy\"}"});
  expect_all(schema(R"({"type": "string", "maxLength": 0})"), {"\"\""}, {"\"a\""});
}

TEST(JsonSchema, LengthLimitsThatCannotBeEnforcedAreRefused) {
  for (const char* bad : {R"({"type": "string", "minLength": 3, "maxLength": 2})",
                          R"({"enum": ["a", "bbb"], "maxLength": 2})",
                          R"({"anyOf": [{"type": "string"}, {"type": "null"}], "minLength": 1})",
                          R"({"type": "string", "maxLength": -1})"}) {
    EXPECT_THROW(schema(bad), JsonSchemaError) << bad;
  }
}

TEST(JsonSchema, EnumAndConst) {
  const auto s = schema(R"({"enum": ["red", "green", 1, 12, null, {"a": [1]}]})");
  expect_all(s, {"\"red\"", "\"green\"", "1", "12", "null", R"({"a":[1]})"},
             {"\"blue\"", "2", "123", "\"re\"", R"({"a": [1]})"});
  EXPECT_FALSE(prefix_ok(s, "\"b"));
  const auto in_array = schema(R"({"type": "array", "items": {"enum": [1, 12]}})");
  expect_all(in_array, {"[1,12]", "[12, 1]"}, {"[2]", "[121]"});
  expect_all(schema(R"({"const": "x"})"), {"\"x\""}, {"\"y\""});
  // type filters the enum.
  expect_all(schema(R"({"type": "string", "enum": ["a", 1]})"), {"\"a\""}, {"1"});
}

TEST(JsonSchema, AnyOfWithDistinctFirstBytes) {
  const auto s = schema(R"({"anyOf": [{"type": "string"}, {"type": "null"},
                                      {"type": "array", "items": {"type": "integer"}}]})");
  expect_all(s, {"\"a\"", "null", "[1,2]"}, {"1", "[\"a\"]", "true"});
}

TEST(JsonSchema, RefsAndDefsIncludingRecursion) {
  const auto s = schema(R"({
      "$defs": {"node": {"type": "object",
                         "properties": {"v": {"type": "integer"},
                                        "next": {"anyOf": [{"$ref": "#/$defs/node"},
                                                           {"type": "null"}]}},
                         "required": ["v"], "additionalProperties": false}},
      "$ref": "#/$defs/node"})");
  expect_all(s, {R"({"v":1})", R"({"v":1,"next":{"v":2,"next":null}})"},
             {R"({"v":1,"next":{}})", R"({"next":null})"});
}

TEST(JsonSchema, AnnotationsAreIgnored) {
  const auto s = schema(R"({"title": "T", "description": "d", "$schema": "x", "default": 1,
                            "examples": [1], "type": "integer"})");
  EXPECT_TRUE(matches(s, "5"));
}

// The keyword path the error names, or "(compiled)" when the schema compiles.
std::string error_path(const char* text) {
  try {
    JsonSchema::compile(json::parse(text));
  } catch (const JsonSchemaError& e) {
    return e.path();
  }
  return "(compiled)";
}

TEST(JsonSchema, UnsupportedSchemasNameTheKeyword) {
  EXPECT_EQ(error_path(R"({"type": "string", "format": "date-time"})"), "format");
  EXPECT_EQ(error_path(R"({"enum": ["a"], "minLength": 2})"), "minLength");
  EXPECT_EQ(error_path(R"({"properties": {"a": {"type": "string", "pattern": "x"}}})"),
            "properties.a.pattern");
  EXPECT_EQ(error_path(R"({"type": "integer", "minimum": 0})"), "minimum");
  EXPECT_EQ(error_path(R"({"type": "array", "items": [{"type": "string"}]})"), "items");
  EXPECT_EQ(error_path(R"({"oneOf": [{"type": "string"}]})"), "oneOf");
  EXPECT_EQ(error_path(R"({"allOf": [{"type": "string"}]})"), "allOf");
  EXPECT_EQ(error_path(R"({"type": "strin"})"), "type");
  EXPECT_EQ(error_path(R"({"additionalProperties": {"type": "string"}})"), "additionalProperties");
  EXPECT_EQ(error_path(R"({"type": "object", "required": ["a"]})"), "required");
  EXPECT_EQ(error_path(R"({"properties": {"a": {}}, "required": ["b"]})"), "required");
  EXPECT_EQ(error_path(R"({"anyOf": [{"type": "integer"}, {"type": "number"}]})"), "anyOf[1]");
  EXPECT_EQ(error_path(R"({"$ref": "http://example.com/s.json"})"), "$ref");
  EXPECT_EQ(error_path(R"({"$ref": "#/$defs/missing"})"), "$ref");
  EXPECT_EQ(error_path(R"({"enum": []})"), "enum");
  EXPECT_EQ(error_path(R"({"type": "string", "enum": [1]})"), "enum");
  EXPECT_EQ(error_path(R"({"minItems": 3, "maxItems": 2})"), "minItems");
  EXPECT_EQ(error_path(R"({"enum": [1], "properties": {}})"), "properties");
  EXPECT_EQ(error_path("false"), "");
  EXPECT_EQ(error_path("[]"), "");
  EXPECT_EQ(error_path(R"({"type": "object"})"), "(compiled)");
  EXPECT_EQ(error_path("true"), "(compiled)");
}

}  // namespace
}  // namespace kiln::engine
