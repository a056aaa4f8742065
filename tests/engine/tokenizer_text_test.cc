#include "kiln/engine/tokenizer_text.h"

#include <gtest/gtest.h>

#include "kiln/engine/stop_checker.h"

namespace kiln::engine {
namespace {

std::unique_ptr<model::Tokenizer> tiny_llama_vocab() {
  model::TokenizerVocab v;
  v.model = "llama";
  v.pre = "default";
  v.tokens = {"<unk>",  "<s>",    "</s>", "\xE2\x96\x81hello", "\xE2\x96\x81world",
              "<0xC3>", "<0xA9>", "x"};
  v.scores = {0, 0, 0, -1, -2, 0, 0, -3};
  v.token_types = {static_cast<int32_t>(model::TokenType::kUnknown),
                   static_cast<int32_t>(model::TokenType::kControl),
                   static_cast<int32_t>(model::TokenType::kControl),
                   static_cast<int32_t>(model::TokenType::kNormal),
                   static_cast<int32_t>(model::TokenType::kNormal),
                   static_cast<int32_t>(model::TokenType::kByte),
                   static_cast<int32_t>(model::TokenType::kByte),
                   static_cast<int32_t>(model::TokenType::kNormal)};
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_space_prefix = true;  // the case where a stream must not drop a generated space
  return model::Tokenizer::create(std::move(v));
}

TEST(TokenizerText, StreamsGeneratedTextThroughTheModelTokenizer) {
  auto tok = tiny_llama_vocab();
  TokenizerText text(*tok);
  EXPECT_EQ(text.vocab_size(), 8);
  EXPECT_TRUE(text.is_end_of_generation(2));
  EXPECT_FALSE(text.is_end_of_generation(3));
  auto s = text.stream(true);
  EXPECT_EQ(s->push(4), " world");  // continues a prompt: the space is real
  EXPECT_EQ(s->push(5), "");        // half of "é"
  EXPECT_EQ(s->push(6), "\xC3\xA9");
  EXPECT_EQ(s->push(2), "");  // </s> skipped

  StopConditions sc;
  sc.max_new_tokens = 10;
  sc.stop_strings = {"d\xC3\xA9x"};
  const int32_t eog[] = {2};
  StopChecker c(sc, text, true, eog);
  std::string out;
  for (int32_t t : {3, 4, 5, 6}) out += c.on_token(t).text_delta;
  EXPECT_EQ(out, " hello worl");  // "d" + "é" held: they may begin the stop string
  StopUpdate u = c.on_token(7);
  EXPECT_TRUE(u.finished);
  EXPECT_EQ(u.text_delta, "");
  EXPECT_EQ(u.matched_stop, sc.stop_strings[0]);
}

}  // namespace
}  // namespace kiln::engine
