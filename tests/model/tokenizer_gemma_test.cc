// Facts about the default model's (Gemma 3) tokenizer that the engine relies on.
#include <gtest/gtest.h>

#include "kiln/model/chat_template.h"
#include "kiln/model/incremental_decoder.h"
#include "kiln/model/tokenizer.h"
#include "tokenizer_test_support.h"

namespace kiln::model {
namespace {

class GemmaTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    auto path = testing::fixture_path("gemma3_vocab.json", &why);
    if (path) tokenizer_ = Tokenizer::create(testing::load_vocab(*path)).release();
    skip_reason_ = new std::string(why);
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
    delete skip_reason_;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) GTEST_SKIP() << *skip_reason_;
  }
  static Tokenizer* tokenizer_;
  static std::string* skip_reason_;
};
Tokenizer* GemmaTokenizer::tokenizer_ = nullptr;
std::string* GemmaTokenizer::skip_reason_ = nullptr;

TEST_F(GemmaTokenizer, SpecialIds) {
  const Tokenizer& tok = *tokenizer_;
  EXPECT_EQ(tok.vocab_size(), 262144);
  EXPECT_EQ(tok.bos(), 2);
  EXPECT_EQ(tok.eos(), 1);
  EXPECT_EQ(tok.piece(105), "<start_of_turn>");
  EXPECT_EQ(tok.piece(106), "<end_of_turn>");
  EXPECT_TRUE(tok.is_end_of_generation(1));
  EXPECT_TRUE(tok.is_end_of_generation(106));
  EXPECT_FALSE(tok.is_end_of_generation(105));
  EXPECT_FALSE(tok.is_end_of_generation(107));
  EXPECT_EQ(tok.encode("<end_of_turn>", false, true), std::vector<int32_t>{106});
}

TEST_F(GemmaTokenizer, ChatPromptEncodesToTurnMarkers) {
  const Tokenizer& tok = *tokenizer_;
  const std::string prompt = apply_chat_template(ChatTemplateKind::kGemma, {{"user", "Hi"}}, true);
  const std::vector<int32_t> ids = tok.encode(prompt, true, true);
  ASSERT_GE(ids.size(), 6u);
  EXPECT_EQ(ids[0], 2);    // <bos>
  EXPECT_EQ(ids[1], 105);  // <start_of_turn>
  EXPECT_EQ(tok.piece(ids[2]), "user");
  EXPECT_EQ(ids[3], 107);  // "\n"
  EXPECT_EQ(ids[ids.size() - 3], 105);
  EXPECT_EQ(tok.piece(ids[ids.size() - 2]), "model");
  EXPECT_EQ(ids.back(), 107);
  EXPECT_EQ(tok.decode(ids, true), "user\nHi\nmodel\n");
}

// A character missing from the vocab streams as byte tokens that only appear once complete.
TEST_F(GemmaTokenizer, ByteFallbackStreamsWholeCharacters) {
  const Tokenizer& tok = *tokenizer_;
  const std::string text = "x\xF3\xA0\x80\x81y";  // U+E0001 (a tag character)
  const std::vector<int32_t> ids = tok.encode(text, false, false);
  int byte_tokens = 0;
  for (int32_t id : ids) byte_tokens += tok.token_type(id) == TokenType::kByte;
  ASSERT_EQ(byte_tokens, 4);
  IncrementalDecoder dec(tok, true);
  std::vector<std::string> parts;
  for (int32_t id : ids) parts.push_back(dec.push(id));
  EXPECT_EQ(parts, (std::vector<std::string>{"x", "", "", "", "\xF3\xA0\x80\x81", "y"}));
  EXPECT_EQ(tok.decode(ids, false), text);
}

}  // namespace
}  // namespace kiln::model
