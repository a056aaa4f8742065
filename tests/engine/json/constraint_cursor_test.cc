// ConstraintCursor on its own: a request's place in its JSON constraint, token by token, over
// FakeTokenizer's single-letter tokens (no model, no scheduler).
#include "kiln/engine/json/constraint_cursor.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/fake_model.h"
#include "kiln/engine/json/json_schema.h"

namespace kiln::engine {
namespace {

using testing::FakeTokenizer;

std::shared_ptr<const JsonSchema> boolean_or_null() {
  return JsonSchema::compile(nlohmann::json::parse(R"({"type": ["boolean", "null"]})"));
}

int32_t L(char c) { return FakeTokenizer::letter(c); }

TEST(ConstraintCursor, WithoutASchemaNothingIsConstrained) {
  FakeTokenizer tok;
  ConstraintCursor cursor;
  EXPECT_FALSE(cursor.open());
  EXPECT_TRUE(cursor.feed(L('x'), tok));
  EXPECT_FALSE(cursor.open());
  EXPECT_TRUE(cursor.states_along(std::vector<int32_t>{L('a')}, tok).empty());
}

TEST(ConstraintCursor, FollowsTheValueAndRefusesWhatItCannotContinue) {
  FakeTokenizer tok;
  ConstraintCursor cursor(boolean_or_null(), {}, false, true, {FakeTokenizer::kEos});
  ASSERT_TRUE(cursor.open());
  EXPECT_FALSE(cursor.matcher().complete());
  for (char c : std::string("nul")) EXPECT_TRUE(cursor.feed(L(c), tok)) << c;
  EXPECT_FALSE(cursor.matcher().complete());
  EXPECT_TRUE(cursor.feed(L('l'), tok));
  EXPECT_TRUE(cursor.matcher().complete());
  // An end id ends the value: accepted, the state unchanged.
  EXPECT_TRUE(cursor.feed(FakeTokenizer::kEos, tok));
  EXPECT_TRUE(cursor.open());
  ConstraintCursor refusing(boolean_or_null(), {}, false, true, {FakeTokenizer::kEos});
  EXPECT_FALSE(refusing.feed(L('x'), tok));
  ASSERT_EQ(refusing.end_ids().size(), 1u);
  EXPECT_EQ(refusing.end_ids()[0], FakeTokenizer::kEos);
}

TEST(ConstraintCursor, AfterAMarkerTheValueOpensAndCloses) {
  FakeTokenizer tok;
  ConstraintCursor cursor(boolean_or_null(), {"zz"}, false, true, {FakeTokenizer::kEos});
  EXPECT_FALSE(cursor.open());  // waits for the marker
  EXPECT_TRUE(cursor.feed(L('q'), tok));
  EXPECT_TRUE(cursor.feed(L('z'), tok));
  EXPECT_FALSE(cursor.open());
  EXPECT_TRUE(cursor.feed(L('z'), tok));
  ASSERT_TRUE(cursor.open());                            // "qzz": the marker is complete
  EXPECT_TRUE(cursor.feed(FakeTokenizer::kSpace, tok));  // leading space after a marker
  EXPECT_FALSE(cursor.feed(L('x'), tok));                // the value is constrained now
}

TEST(ConstraintCursor, ACompleteValueAfterAMarkerLiftsTheConstraintUntilTheNextMarker) {
  FakeTokenizer tok;
  ConstraintCursor cursor(boolean_or_null(), {"zz"}, false, true, {FakeTokenizer::kEos});
  for (char c : std::string("zztrue")) EXPECT_TRUE(cursor.feed(L(c), tok)) << c;
  EXPECT_FALSE(cursor.open());            // complete: lifted
  EXPECT_TRUE(cursor.feed(L('x'), tok));  // anything goes
  for (char c : std::string("zz")) EXPECT_TRUE(cursor.feed(L(c), tok));
  EXPECT_TRUE(cursor.open());  // the next marker opens it again
  EXPECT_FALSE(cursor.feed(L('x'), tok));
}

TEST(ConstraintCursor, BytesAfterTheMarkerInTheSameTokenStartTheValue) {
  FakeTokenizer tok;
  // Token 40 reads "t40": after the marker "t4" comes "0", which no boolean starts with, so
  // this value goes unconstrained and the marker is looked for again.
  ConstraintCursor refused(boolean_or_null(), {"t4"}, false, true, {FakeTokenizer::kEos});
  EXPECT_TRUE(refused.feed(40, tok));
  EXPECT_FALSE(refused.open());
  // Token 41 reads "t41" and the marker is "t41": nothing follows, the value is open.
  ConstraintCursor opened(boolean_or_null(), {"t41"}, false, true, {FakeTokenizer::kEos});
  EXPECT_TRUE(opened.feed(41, tok));
  EXPECT_TRUE(opened.open());
}

TEST(ConstraintCursor, StatesAlongTheProposalsStopAtARefusalOrACompleteValue) {
  FakeTokenizer tok;
  ConstraintCursor cursor(boolean_or_null(), {}, false, true, {FakeTokenizer::kEos});
  const std::vector<int32_t> value = {L('t'), L('r'), L('u'), L('e'), FakeTokenizer::kEos};
  // "", "t", "tr", "tru": the state after "true" is complete, and no row samples past it.
  const std::vector<ConstraintMatcher> states = cursor.states_along(value, tok);
  ASSERT_EQ(states.size(), 4u);
  EXPECT_FALSE(states[3].complete());
  ConstraintMatcher last = states[3];
  EXPECT_TRUE(last.feed("e"));
  EXPECT_TRUE(last.complete());
  // A refused proposal ends the path at once.
  EXPECT_EQ(cursor.states_along(std::vector<int32_t>{L('x'), L('t')}, tok).size(), 1u);
  // The cursor itself did not move.
  EXPECT_TRUE(cursor.feed(L('f'), tok));
}

}  // namespace
}  // namespace kiln::engine
