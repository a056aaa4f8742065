// The request's scheduling `priority`: a top-level integer of /generate (SGLang's field) and of
// both OpenAI routes (kiln's extension), within int32, carried into the engine request. A bad
// value is a 400 naming `priority`.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kiln/server/http_error.h"
#include "kiln/server/native_request_parser.h"
#include "kiln/server/openai_request_parser.h"
#include "kiln/server/request_builder.h"
#include "server/parser_test_util.h"

namespace kiln::server {
namespace {

using nlohmann::json;
using testing::error_field;
using testing::limits;

// Every route's body with `priority` set to the JSON text `value`.
std::vector<std::pair<std::string, std::function<int32_t(const json&)>>> routes() {
  return {
      {R"({"text": "a", "priority": VALUE})",
       [](const json& b) { return parse_native_generate(b, limits()).options[0].priority; }},
      {R"({"prompt": "a", "priority": VALUE})",
       [](const json& b) { return parse_completion_request(b, limits()).options.priority; }},
      {R"({"messages": [{"role": "user", "content": "x"}], "priority": VALUE})",
       [](const json& b) { return parse_chat_request(b, limits()).options.priority; }},
  };
}

json body_with(std::string body, const std::string& value) {
  body.replace(body.find("VALUE"), 5, value);
  return json::parse(body);
}

TEST(PriorityField, EveryRouteReadsIt) {
  for (const auto& [body, parse] : routes()) {
    SCOPED_TRACE(body);
    EXPECT_EQ(parse(body_with(body, "7")), 7);
    EXPECT_EQ(parse(body_with(body, "-3")), -3);
    EXPECT_EQ(parse(body_with(body, "null")), 0);  // null: not given
    EXPECT_EQ(parse(body_with(body, "2147483647")), 2147483647);
    EXPECT_EQ(parse(body_with(body, "-2147483648")), -2147483647 - 1);
    EXPECT_EQ(parse(body_with(body, "4.0")), 4);  // JSON has one number type
  }
  EXPECT_EQ(parse_native_generate(json::parse(R"({"text": "a"})"), limits()).options[0].priority,
            0);
}

TEST(PriorityField, BadValuesAre400sNamingIt) {
  for (const auto& [body, parse] : routes()) {
    SCOPED_TRACE(body);
    for (const char* bad : {"2147483648", "-2147483649", "1.5", "\"high\"", "true", "[1]"}) {
      SCOPED_TRACE(bad);
      const json b = body_with(body, bad);
      // (Captured by name: clang before 16 cannot capture a structured binding.)
      EXPECT_EQ(error_field([&b, &parse = parse] { parse(b); }), "priority");
    }
  }
  try {
    parse_completion_request(json::parse(R"({"prompt": "a", "priority": 9999999999})"), limits());
    ADD_FAILURE() << "accepted";
  } catch (const HttpError& e) {
    EXPECT_NE(std::string(e.what()).find("[-2147483648, 2147483647]"), std::string::npos)
        << e.what();
  }
}

TEST(PriorityField, AppliesToEveryPromptOfABatch) {
  auto r = parse_native_generate(
      json::parse(R"({"text": ["a", "b"], "priority": 5, "sampling_params": [{}, {"n": 2}]})"),
      limits());
  ASSERT_EQ(r.options.size(), 2u);
  EXPECT_EQ(r.options[0].priority, 5);
  EXPECT_EQ(r.options[1].priority, 5);
  // Per prompt it belongs to the request, not to its sampling parameters.
  EXPECT_EQ(error_field([&] {
              parse_native_generate(
                  json::parse(R"({"text": "a", "sampling_params": {"priority": 1}})"), limits());
            }),
            "sampling_params.priority");
}

TEST(PriorityField, ReachesTheEngineRequest) {
  GenerationOptions o;
  o.priority = -9;
  PromptLimits lim{100, 0};
  EXPECT_EQ(make_engine_request({1, 2}, o, 0, -1, lim, "text").priority, -9);
  EXPECT_EQ(make_engine_request({1, 2}, o, 1, -1, lim, "text").priority, -9);
}

}  // namespace
}  // namespace kiln::server
