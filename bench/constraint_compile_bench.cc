// Compiling a schema's string constraints (pattern, format, minLength/maxLength) into one
// code-point automaton (engine/json/regex_subset.h, string_automaton.h), on the inputs a
// request could send to make it slow: long counted repetitions, a large maxLength beside a
// pattern, many alternatives, nested quantifiers, repeated empty groups, deep nesting, and many
// patterns in one schema. A schema is request input, so each must compile fast or be refused
// fast; counter `refused` is 1 when JsonSchema::compile refused it (JsonSchemaError).
//
// Run: build/release/bench/constraint_compile_bench (no model needed).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>

#include "kiln/engine/json/json_schema.h"

namespace kiln::engine {
namespace {

using nlohmann::json;

json string_schema(const std::string& pattern, int64_t max_length = -1) {
  json s = {{"type", "string"}, {"pattern", pattern}};
  if (max_length >= 0) s["maxLength"] = max_length;
  return s;
}

std::string repeat(const std::string& s, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += s;
  return out;
}

// "a{1000}b{1000}...": one counted run per letter.
std::string counted_runs(int letters) {
  std::string out;
  for (int i = 0; i < letters; ++i) out += std::string(1, static_cast<char>('a' + i)) + "{1000}";
  return out;
}

// `count` CJK characters as unanchored alternatives: each brings its own "anything" prefix.
std::string alternatives(int count) {
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

// An object with `count` string properties, each with the same pattern: one schema's budget.
json many_patterns(int count, const std::string& pattern) {
  json props = json::object();
  for (int i = 0; i < count; ++i) props[fmt::format("p{}", i)] = string_schema(pattern);
  return {{"type", "object"}, {"properties", props}};
}

void compile(benchmark::State& state, const json& schema) {
  bool refused = false;
  for (auto _ : state) {
    try {
      benchmark::DoNotOptimize(JsonSchema::compile(schema));
      refused = false;
    } catch (const JsonSchemaError&) {
      refused = true;
    }
  }
  state.counters["refused"] = refused ? 1 : 0;
}

#define KILN_COMPILE_BENCH(name, schema) \
  BENCHMARK_CAPTURE(compile, name, schema)->Unit(benchmark::kMillisecond)

KILN_COMPILE_BENCH(pattern_a_maxLength_30000, string_schema("a", 30000));
KILN_COMPILE_BENCH(class_0_1000_maxLength_30000, string_schema("[^<>]{0,1000}", 30000));
KILN_COMPILE_BENCH(anchored_class_0_1000, string_schema("^[^<>]{0,1000}$"));
KILN_COMPILE_BENCH(a1000_times_60_anchored, string_schema("^(a{1000}){60}$"));
KILN_COMPILE_BENCH(a1000_times_95_anchored, string_schema("^(a{1000}){95}$"));
KILN_COMPILE_BENCH(a1000_b1000_to_z1000, string_schema(counted_runs(26)));
KILN_COMPILE_BENCH(a1000_times_1000, string_schema("(a{1000}){1000}"));
KILN_COMPILE_BENCH(empty_group_1000_cubed, string_schema("((((){1000}){1000}){1000})"));
KILN_COMPILE_BENCH(nested_quantifiers, string_schema("^((a|b)*c?(d+e*)*){100}f{0,1000}$"));
KILN_COMPILE_BENCH(alternatives_300, string_schema(alternatives(300)));
KILN_COMPILE_BENCH(alternatives_3000, string_schema(alternatives(3000)));
KILN_COMPILE_BENCH(nested_groups_100000,
                   string_schema(repeat("(", 100000) + "a" + repeat(")", 100000)));
KILN_COMPILE_BENCH(date_time_format, (json{{"type", "string"}, {"format", "date-time"}}));
KILN_COMPILE_BENCH(patterns_60_of_1000_states, many_patterns(60, "^[a-z]{0,1000}$"));

}  // namespace
}  // namespace kiln::engine

BENCHMARK_MAIN();
