// JSON-schema constraints: what each supported keyword lets through and refuses (as whole
// texts and as prefixes: a refused value must be refused at its first wrong byte, so that
// constrained decoding never walks into a dead end), and the errors for unsupported schemas.
#include "kiln/engine/json/json_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kiln/engine/json/json_matcher.h"

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

TEST(JsonSchema, IntegerBounds) {
  const auto s = schema(R"({"type": "integer", "minimum": 1, "maximum": 12})");
  expect_all(s, {"1", "9", "10", "12"}, {"0", "13", "-1", "100", "1.5", "1e1", "01"});
  EXPECT_FALSE(prefix_ok(s, "-"));   // refused at the sign
  EXPECT_FALSE(prefix_ok(s, "0"));   // and at a first digit no completion saves
  EXPECT_FALSE(prefix_ok(s, "13"));  // at the second digit
  EXPECT_TRUE(prefix_ok(s, "2"));    // in bounds, though no digit may follow it
  EXPECT_TRUE(prefix_ok(s, "1"));
  EXPECT_FALSE(prefix_ok(s, "21"));
  // Exclusive bounds become inclusive integer ones.
  expect_all(schema(R"({"type": "integer", "exclusiveMinimum": 0.5, "exclusiveMaximum": 3})"),
             {"1", "2"}, {"0", "3"});
  // Negative ranges, and the tighter of minimum and exclusiveMinimum.
  const auto neg =
      schema(R"({"type": "integer", "minimum": -30, "exclusiveMinimum": -21, "maximum": -10})");
  expect_all(neg, {"-10", "-15", "-20"}, {"-9", "-21", "-30", "10", "-5", "-0"});
  EXPECT_TRUE(prefix_ok(neg, "-2"));
  EXPECT_FALSE(prefix_ok(neg, "-3"));
  // Large bounds: a digit leads anywhere above it.
  const auto big = schema(R"({"type": "integer", "minimum": 1000})");
  expect_all(big, {"1000", "999999", "123456789012345678"}, {"999", "0", "1234567890123456789"});
  EXPECT_TRUE(prefix_ok(big, "9"));
}

TEST(JsonSchema, NumberBounds) {
  const auto s = schema(R"({"type": "number", "exclusiveMinimum": 0, "maximum": 1})");
  expect_all(s, {"0.5", "1", "1.0", "0.001", "1.00"},
             {"0", "0.0", "1.5", "-0.1", "2", "1e0", "1.01", "-0"});
  EXPECT_TRUE(prefix_ok(s, "0.0"));   // 0.0001 is still ahead
  EXPECT_TRUE(prefix_ok(s, "1."));    // 1.0
  EXPECT_FALSE(prefix_ok(s, "1.5"));  // refused at the 5
  EXPECT_FALSE(prefix_ok(s, "1e"));   // no exponents in a bounded number
  expect_all(schema(R"({"type": ["number", "null"], "minimum": -2.5, "maximum": -2.25})"),
             {"-2.5", "-2.3", "-2.25", "null"}, {"-2.2", "-2.51", "-3", "2.3"});
}

// Every prefix the matcher accepts of a bounded number leads to a number in bounds, and every
// prefix of such a number is accepted (no dead end, nothing in bounds refused): checked against
// all numbers of up to two integer digits and three fraction digits.
TEST(JsonSchema, BoundedNumbersHaveNoDeadEnds) {
  struct Case {
    const char* schema;
    double lo, hi;
    bool lo_open, hi_open, integer;
  };
  const Case cases[] = {
      {R"({"type": "integer", "minimum": -12, "maximum": 7})", -12, 7, false, false, true},
      {R"({"type": "integer", "minimum": 15, "maximum": 60})", 15, 60, false, false, true},
      {R"({"type": "number", "exclusiveMinimum": -1.5, "maximum": 2})", -1.5, 2, true, false,
       false},
      {R"({"type": "number", "minimum": 0.25, "exclusiveMaximum": 0.5})", 0.25, 0.5, false, true,
       false},
      {R"({"type": "number", "minimum": 9.9, "maximum": 10.1})", 9.9, 10.1, false, false, false},
  };
  for (const Case& c : cases) {
    const auto s = schema(c.schema);
    std::set<std::string> valid_prefixes;
    int valid = 0;
    for (int sign = 0; sign < 2; ++sign) {
      for (int whole = 0; whole < 100; ++whole) {
        for (int frac_digits = 0; frac_digits <= (c.integer ? 0 : 3); ++frac_digits) {
          const int steps = frac_digits == 0 ? 1 : static_cast<int>(std::pow(10, frac_digits));
          for (int f = 0; f < steps; ++f) {
            std::string text = sign ? "-" : "";
            text += std::to_string(whole);
            if (frac_digits > 0) {
              std::string digits = std::to_string(f);
              text.append(".").append(frac_digits - digits.size(), '0').append(digits);
            }
            const double v = std::stod(text);
            const bool in =
                (c.lo_open ? v > c.lo : v >= c.lo) && (c.hi_open ? v < c.hi : v <= c.hi);
            EXPECT_EQ(matches(s, text), in) << c.schema << " " << text;
            if (!in) continue;
            ++valid;
            for (size_t n = 1; n <= text.size(); ++n) valid_prefixes.insert(text.substr(0, n));
          }
        }
      }
    }
    ASSERT_GT(valid, 0) << c.schema;
    // Every string of up to 4 bytes over the number alphabet: accepted exactly when it is a
    // prefix of a number in bounds.
    const std::string alphabet = "-0123456789.";
    std::vector<std::string> level = {""};
    for (int len = 1; len <= 4; ++len) {
      std::vector<std::string> next;
      for (const auto& p : level) {
        for (char ch : alphabet) next.push_back(p + ch);
      }
      for (const auto& t : next) {
        EXPECT_EQ(prefix_ok(s, t), valid_prefixes.count(t) > 0) << c.schema << " " << t;
      }
      level = std::move(next);
    }
  }
}

TEST(JsonSchema, PatternsHoldOnTheDecodedString) {
  const auto s = schema(R"({"type": "string", "pattern": "^[a-c]{2}-(\\d|\u00e9)\\n?$"})");
  expect_all(s, {R"("ab-1")", R"("cc-9\n")", "\"ab-\xC3\xA9\""},
             {R"("ab1")", R"("ab-")", R"("abc-1")", R"("ab-1\t")",
              R"("ab-\u00e9")",  // no \u escapes in patterned strings
              R"("\u0061b-1")", "\"ab-\xC3\xA8\""});
  // Escapes decode before the pattern sees them: \" is one quote character, \/ a slash.
  expect_all(schema(R"({"type": "string", "pattern": "^\"/$"})"), {R"("\"\/")", R"("\"/")"},
             {R"("\\"")"});
  // Refused at the first byte that cannot lead anywhere: a lead byte of characters the
  // pattern has no room for.
  EXPECT_FALSE(prefix_ok(s, "\"ab-\xE2"));
  EXPECT_TRUE(prefix_ok(s, "\"ab-\xC3"));
  EXPECT_FALSE(prefix_ok(s, "\"ab-\xC3\xA8"));
  EXPECT_FALSE(prefix_ok(s, "\"ab\\"));  // no escape can continue here
  // Only strings are patterned; other types pass as they are.
  expect_all(schema(R"({"type": ["string", "integer"], "pattern": "^x$"})"), {R"("x")", "12"},
             {R"("y")"});
}

TEST(JsonSchema, FormatsAndLengthsCombine) {
  const auto s = schema(R"({"type": "object", "properties": {
      "day": {"type": "string", "format": "date"},
      "id": {"type": "string", "format": "uuid"},
      "code": {"type": "string", "pattern": "^[A-Z]+$", "minLength": 2, "maxLength": 3}},
      "required": ["day", "id", "code"], "additionalProperties": false})");
  const std::string id = R"("id": "123e4567-e89b-12d3-a456-426614174000")";
  expect_all(s,
             {R"({"day": "2024-02-29", )" + id + R"(, "code": "AB"})",
              R"({"code": "XYZ", "day": "2023-12-31", )" + id + "}"},
             {R"({"day": "2023-02-29", )" + id + R"(, "code": "AB"})",
              R"({"day": "2024-02-29", )" + id + R"(, "code": "A"})",
              R"({"day": "2024-02-29", )" + id + R"(, "code": "ABCD"})",
              R"({"day": "2024-02-29", )" + id + R"(, "code": "ab"})"});
  // A pattern on a string key of a map-like object is not confused with the key itself.
  expect_all(schema(R"({"type": "object", "additionalProperties": true})"), {R"({"k": 1})"}, {});
}

// Every byte string a patterned schema accepts can still be finished: a depth-first search
// for a completion over the same alphabet finds one from every accepted prefix.
bool can_finish(const JsonMatcher& m, const std::string& alphabet, int depth) {
  if (m.complete()) return true;
  if (depth == 0) return false;
  for (char c : alphabet) {
    JsonMatcher copy = m;
    if (copy.feed(std::string(1, c)) && can_finish(copy, alphabet, depth - 1)) return true;
  }
  return false;
}

TEST(JsonSchema, PatternedStringsHaveNoDeadEnds) {
  const std::string alphabet = "\"ab1\\n\xC3\xA9\xA8\xE2\x82\xAC";
  for (const char* text : {R"({"type": "string", "pattern": "^(ab|\u00e9)+1?$"})",
                           R"({"type": "string", "pattern": "b\\n", "maxLength": 3})",
                           R"({"type": "string", "pattern": "^\u20ac?[ab]{1,2}$"})"}) {
    const auto s = schema(text);
    std::vector<std::string> level = {""};
    int accepted = 0;
    for (int len = 1; len <= 5; ++len) {
      std::vector<std::string> next;
      for (const auto& p : level) {
        for (char c : alphabet) {
          JsonMatcher m(s);
          if (!m.feed(p + c)) continue;
          ++accepted;
          EXPECT_TRUE(can_finish(m, alphabet, 8)) << text << " after " << p + c;
          next.push_back(p + c);
        }
      }
      level = std::move(next);
    }
    EXPECT_GT(accepted, 5) << text;
  }
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
  EXPECT_EQ(error_path(R"({"type": "string", "format": "uri"})"), "format");
  EXPECT_EQ(error_path(R"({"type": "string", "format": 3})"), "format");
  EXPECT_EQ(error_path(R"({"type": "string", "pattern": "(a)\\1"})"), "pattern");
  EXPECT_EQ(error_path(R"({"type": "string", "pattern": "^a{5}$", "maxLength": 4})"), "pattern");
  EXPECT_EQ(error_path(R"({"enum": ["a"], "pattern": "a"})"), "pattern");
  EXPECT_EQ(error_path(R"({"anyOf": [{"type": "null"}], "format": "date"})"), "format");
  EXPECT_EQ(error_path(R"({"enum": ["a"], "minLength": 2})"), "minLength");
  EXPECT_EQ(error_path(R"j({"properties": {"a": {"type": "string", "pattern": "(?=x)"}}})j"),
            "properties.a.pattern");
  EXPECT_EQ(error_path(R"({"type": "integer", "exclusiveMinimum": true})"), "exclusiveMinimum");
  EXPECT_EQ(error_path(R"({"type": "integer", "minimum": "3"})"), "minimum");
  EXPECT_EQ(error_path(R"({"enum": [1, 2], "maximum": 1})"), "maximum");
  EXPECT_EQ(error_path(R"({"type": "integer", "minimum": 5, "maximum": 4})"), "minimum");
  EXPECT_EQ(error_path(R"({"type": "integer", "minimum": 1.2, "maximum": 1.8})"), "minimum");
  EXPECT_EQ(error_path(R"({"type": "number", "minimum": 1e19})"), "minimum");
  EXPECT_EQ(error_path(R"({"type": "integer", "minimum": 0})"), "(compiled)");
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
  EXPECT_EQ(error_path(R"({"type": "string", "minLength": 3, "maxLength": 2})"), "minLength");
  EXPECT_EQ(error_path(R"({"type": "string", "maxLength": -1})"), "maxLength");
  EXPECT_EQ(error_path(R"({"type": "array", "items": {"type": "array", "maxItems": 1.5}})"),
            "items.maxItems");
  EXPECT_EQ(error_path(R"({"enum": [1], "properties": {}})"), "properties");
  EXPECT_EQ(error_path("false"), "");
  EXPECT_EQ(error_path("[]"), "");
  EXPECT_EQ(error_path(R"({"type": "object"})"), "(compiled)");
  EXPECT_EQ(error_path("true"), "(compiled)");
}

}  // namespace
}  // namespace kiln::engine
