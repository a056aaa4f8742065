#include "kiln/model/mistral_call_id.h"

#include <gtest/gtest.h>

#include <set>

namespace kiln::model {
namespace {

bool mistral_shaped(const std::string& id) {
  if (id.size() != 9) return false;
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

TEST(MistralCallId, KeepsIdsThatAlreadyHaveTheShape) {
  EXPECT_EQ(mistral_call_id("a1B2c3D4e"), "a1B2c3D4e");
  EXPECT_EQ(mistral_call_id("123456789"), "123456789");
}

// The values tests/fixtures/make_chat_template_cases.py computes for the same ids: the two
// implementations of the mapping agree.
TEST(MistralCallId, MapsOtherIdsToNineBase62DigitsOfTheirHash) {
  EXPECT_EQ(mistral_call_id("call_1"), "9Gd2dIMCT");
  EXPECT_EQ(mistral_call_id("call_0123456789abcdef01234567"), "Cg3VORcqb");
  std::set<std::string> seen;
  for (const std::string id : {"", "x", "call_a", "call_b", "a1B2c3D4e_", "a1B2c3D4-", "ñandú",
                               "call_0123456789abcdef01234567"}) {
    const std::string got = mistral_call_id(id);
    EXPECT_TRUE(mistral_shaped(got)) << id << " -> " << got;
    EXPECT_EQ(got, mistral_call_id(id));  // deterministic: history renders the same each time
    EXPECT_TRUE(seen.insert(got).second) << id;
  }
}

}  // namespace
}  // namespace kiln::model
