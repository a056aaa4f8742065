// A schema's patterns, formats and length limits are request input: whatever they are, the
// compile ends in an automaton or a refusal naming the limit, never a crash or an unbounded
// run. Groups nest at most kMaxInputNesting levels (input_limits.h); the work of all the
// string constraints of one schema is bounded by one ConstraintBudget (constraint_budget.h).
// No test here measures time: the inputs are the known worst cases, and the budget makes them
// end.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/base/input_limits.h"
#include "kiln/engine/json/constraint_budget.h"
#include "kiln/engine/json/json_matcher.h"
#include "kiln/engine/json/json_schema.h"
#include "kiln/engine/json/regex_subset.h"

namespace kiln::engine {
namespace {

using nlohmann::json;

std::string nested_groups(size_t depth, const std::string& open = "(") {
  std::string p;
  for (size_t i = 0; i < depth; ++i) p += open;
  p += 'a';
  for (size_t i = 0; i < depth; ++i) p += ')';
  return p;
}

std::string regex_error(const std::string& pattern) {
  try {
    compile_pattern(pattern);
  } catch (const RegexError& e) {
    return e.what();
  }
  return "(compiled)";
}

TEST(RegexNesting, GroupsNestedPastTheLimitAreRefusedNamingIt) {
  // Each of these overflowed the stack (parser and Regex destructor) before the limit.
  for (size_t depth : {10'000u, 30'000u, 100'000u}) {
    SCOPED_TRACE(depth);
    EXPECT_NE(regex_error(nested_groups(depth)).find("nests groups deeper than 128 levels"),
              std::string::npos);
    EXPECT_NE(regex_error(nested_groups(depth, "(?:")).find("deeper than 128"), std::string::npos);
    // Unclosed: refused at the same point, before the missing ')' is noticed.
    EXPECT_NE(regex_error(std::string(depth, '(')).find("deeper than 128"), std::string::npos);
  }
}

TEST(RegexNesting, TheLimitItselfIsAccepted) {
  static_assert(kMaxInputNesting == 128);
  EXPECT_EQ(regex_error("^" + nested_groups(128) + "$"), "(compiled)");
  EXPECT_EQ(regex_error("^" + nested_groups(128, "(?:") + "+$"), "(compiled)");
  // The 129th '(' is character 129 (after '^'), counting from 0.
  EXPECT_EQ(regex_error("^" + nested_groups(129) + "$"),
            "nests groups deeper than 128 levels (at character 129)");
  // Depth is nesting, not the number of groups: siblings do not add up.
  std::string siblings = "^";
  for (int i = 0; i < 1000; ++i) siblings += "(a)";
  EXPECT_EQ(regex_error(siblings + "$"), "(compiled)");
}

TEST(RegexNesting, ThroughTheSchemaTheErrorNamesThePattern) {
  const json s = {{"type", "string"}, {"pattern", nested_groups(100'000)}};
  try {
    JsonSchema::compile(s);
    ADD_FAILURE() << "compiled";
  } catch (const JsonSchemaError& e) {
    EXPECT_EQ(e.path(), "pattern");
    EXPECT_NE(std::string(e.what()).find("deeper than 128 levels"), std::string::npos);
  }
}

TEST(ConstraintBudget, ChargesUpToTheLimitThenRefuses) {
  ConstraintBudget b(10);
  b.charge(4);
  b.charge(6);
  EXPECT_EQ(b.used(), 10u);
  try {
    b.charge(1);
    ADD_FAILURE() << "no refusal";
  } catch (const ConstraintBudgetExceeded& e) {
    EXPECT_EQ(std::string(e.what()), "needs more than 10 steps to compile");
  }
  EXPECT_THROW(b.charge(1), ConstraintBudgetExceeded);  // stays spent
}

TEST(ConstraintBudget, EveryStageCharges) {
  // Each stage alone runs out of a small budget rather than finishing unmetered.
  for (const char* p : {"^[a-z]{0,1000}$", "(((a)))", "^(ab|cd)*$"}) {
    SCOPED_TRACE(p);
    ConstraintBudget tiny(20);
    EXPECT_THROW(compile_pattern(p, tiny), ConstraintBudgetExceeded);
    ConstraintBudget enough;
    compile_pattern(p, enough);
    EXPECT_GT(enough.used(), 20u);
  }
  ConstraintBudget b(1000);
  EXPECT_THROW(StringAutomaton::length_between(0, 5000, b), ConstraintBudgetExceeded);
  const StringAutomaton a = compile_pattern("^[0-9]+$");
  const StringAutomaton len = StringAutomaton::length_between(0, 5000);
  ConstraintBudget c(1000);
  EXPECT_THROW(StringAutomaton::intersect(a, len, c), ConstraintBudgetExceeded);
  StringAutomaton big = StringAutomaton::intersect(a, len);
  ConstraintBudget d(1000);
  EXPECT_THROW(big.trim(d), ConstraintBudgetExceeded);
}

// What JsonSchema::compile does with `schema`: "(compiled)", or the error's path and message.
std::string outcome(const json& schema) {
  try {
    JsonSchema::compile(schema);
  } catch (const JsonSchemaError& e) {
    return e.path() + ": " + e.what();
  }
  return "(compiled)";
}

json string_schema(const std::string& pattern, int64_t max_length = -1) {
  json s = {{"type", "string"}, {"pattern", pattern}};
  if (max_length >= 0) s["maxLength"] = max_length;
  return s;
}

std::string cjk_alternatives(int count) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    if (i > 0) out += '|';
    const uint32_t cp = 0x4E00 + static_cast<uint32_t>(i);
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

TEST(ConstraintLimits, WorstCaseInputsCompileOrAreRefused) {
  std::string runs;  // a{1000}b{1000}...z{1000}
  for (char c = 'a'; c <= 'z'; ++c) runs += std::string(1, c) + "{1000}";
  const std::vector<json> inputs = {
      string_schema("^(a{1000}){95}$"),             // more DFA states than allowed
      string_schema("(a{1000}){1000}"),             // more NFA states than allowed
      string_schema("((((){1000}){1000}){1000})"),  // repeated empty groups
      string_schema("^" + runs + "$"),
      string_schema(runs),
      string_schema("[^<>]{0,1000}", 30000),
      string_schema("^[^<>]{0,1000}$", 500),
      string_schema("^[^<>]{0,1000}$", 65535),
      string_schema("a", 65535),
      string_schema("a", 2'000'000'000),
      string_schema("^((a|b)*c?(d+e*)*){100}f{0,1000}$"),
      string_schema("((a*)*)*b"),
      string_schema("^(((a+)+)+)+$"),
      string_schema("(a|aa|aaa|aaaa){1000}"),
      string_schema(cjk_alternatives(300)),  // 3,000: OnePatternOverBudgetIsRefusedNamingTheBudget
      string_schema("^(" + cjk_alternatives(3000) + ")$"),
      string_schema(".{0,1000}x.{0,1000}"),
      {{"type", "string"}, {"format", "ipv6"}, {"pattern", "^[0-9a-f:]{0,1000}$"}},
  };
  for (const json& s : inputs) {
    const std::string dump = s.dump();
    SCOPED_TRACE(dump.substr(0, 120));
    const std::string result = outcome(s);
    if (result == "(compiled)") continue;
    // A refusal names the keyword and a limit (states, steps, or a count).
    EXPECT_EQ(result.rfind("pattern: ", 0), 0u) << result;
    EXPECT_TRUE(result.find("too large") != std::string::npos ||
                result.find("automaton states") != std::string::npos ||
                result.find("steps to compile") != std::string::npos)
        << result;
  }
}

TEST(ConstraintLimits, ReviewersExampleCompilesAndKeepsItsMeaning) {
  // ~10^9 steps before universal states were merged by a worklist.
  const auto s = JsonSchema::compile(string_schema("a", 30000));
  auto matches = [&](const std::string& text) {
    JsonMatcher m(s);
    return m.feed(text) && m.complete();
  };
  EXPECT_TRUE(matches("\"" + std::string(29999, 'b') + "a\""));
  EXPECT_FALSE(matches("\"" + std::string(30000, 'b') + "a\""));
  EXPECT_FALSE(matches("\"" + std::string(100, 'b') + "\""));
}

TEST(ConstraintLimits, OnePatternOverBudgetIsRefusedNamingTheBudget) {
  const std::string result = outcome(string_schema(cjk_alternatives(3000)));
  EXPECT_EQ(result,
            fmt::format("pattern: needs more than {} steps to compile (the budget of all the "
                        "string constraints in one schema)",
                        kMaxConstraintCompileWork));
}

TEST(ConstraintLimits, TheBudgetIsSharedByThePatternsOfOneSchema) {
  const std::string pattern = "^((a|b)*c?(d+e*)*){100}f{0,1000}$";
  ConstraintBudget one;
  compile_pattern(pattern, one);
  const uint64_t fit = kMaxConstraintCompileWork / one.used();
  ASSERT_GE(fit, 2u);
  ASSERT_LT(fit, JsonSchema::kMaxProperties);  // one object can hold more than fit
  auto schema_with = [&](uint64_t count) {
    json props = json::object();
    for (uint64_t i = 0; i < count; ++i) props[fmt::format("p{}", i)] = string_schema(pattern);
    return json{{"type", "object"}, {"properties", props}};
  };
  EXPECT_EQ(outcome(schema_with(fit / 2)), "(compiled)");
  // Each property alone is well within budget; together they are not.
  const std::string result = outcome(schema_with(fit + 1));
  EXPECT_EQ(result.rfind("properties.p", 0), 0u) << result;
  EXPECT_NE(result.find(".pattern: needs more than"), std::string::npos) << result;

  // Tools compiled into one schema share it too.
  std::vector<std::string> names;
  std::vector<json> parameters;
  for (uint64_t i = 0; i <= fit; ++i) {
    names.push_back("f" + std::to_string(i));
    parameters.push_back(schema_with(1));
  }
  try {
    JsonSchema::compile_tool_call(names, parameters, "arguments");
    ADD_FAILURE() << "compiled";
  } catch (const JsonSchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("steps to compile"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::engine
