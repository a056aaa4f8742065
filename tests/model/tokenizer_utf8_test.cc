// UTF-8 sanitizing against Python's bytes.decode("utf-8", errors="replace"), whole and split.
#include "kiln/model/tokenizer_utf8.h"

#include <gtest/gtest.h>

#include "tokenizer_test_support.h"

namespace kiln::model {
namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

TEST(Utf8, ReplacementMatchesPython) {
  std::string why;
  auto path = testing::fixture_path("utf8_cases.json", &why);
  if (!path) GTEST_SKIP() << why;
  size_t n = 0;
  for (const auto& c : testing::read_json(*path)) {
    const std::string bytes = from_hex(c.at("hex").get<std::string>());
    const std::string expected = c.at("text").get<std::string>();
    std::string whole;
    EXPECT_EQ(append_valid_utf8(bytes, true, whole), bytes.size());
    EXPECT_EQ(whole, expected) << c.at("hex");
    // Fed in two parts, holding back an unfinished character at the split: same text.
    for (size_t split = 0; split <= bytes.size(); ++split) {
      std::string pending = bytes.substr(0, split), out;
      pending.erase(0, append_valid_utf8(pending, false, out));
      pending += bytes.substr(split);
      append_valid_utf8(pending, true, out);
      EXPECT_EQ(out, expected) << c.at("hex") << " split at " << split;
    }
    ++n;
  }
  EXPECT_GT(n, 100u);
}

TEST(Utf8, SequenceLength) {
  EXPECT_EQ(utf8_sequence_length("a"), 1u);
  EXPECT_EQ(utf8_sequence_length("\xC3\xA9"), 2u);
  EXPECT_EQ(utf8_sequence_length("\xE2\x82\xAC"), 3u);
  EXPECT_EQ(utf8_sequence_length("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(utf8_sequence_length("\xF0\x9F\x98"), 0u);  // truncated
  EXPECT_EQ(utf8_sequence_length("\xC0\xAF"), 0u);      // overlong
  EXPECT_EQ(utf8_sequence_length("\xED\xA0\x80"), 0u);  // surrogate
  EXPECT_EQ(utf8_sequence_length("\x80"), 0u);
  EXPECT_EQ(utf8_sequence_length(""), 0u);
}

}  // namespace
}  // namespace kiln::model
