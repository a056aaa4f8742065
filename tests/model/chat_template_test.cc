#include "kiln/model/chat_template.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer.h"

namespace kiln::model {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."},
    {"user", "Hi there "},
    {"assistant", "Hello!"},
    {"user", "2+2?"},
};

TEST(ChatTemplate, Gemma) {
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kGemma, kConversation, true),
            "<start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\n2+2?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kGemma, {{"user", "Hi"}}, false),
            "<start_of_turn>user\nHi<end_of_turn>\n");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kGemma, {{"system", "S"}}, true),
            "<start_of_turn>user\nS<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kLlama3, kConversation, true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, ChatML) {
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kChatML, kConversation, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi there <|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kChatML, {{"user", "x"}}, false),
            "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, RolesATemplateCannotTakeAreErrors) {
  EXPECT_THROW(apply_chat_template(ChatTemplateKind::kGemma, {{"tool", "x"}}, true), Error);
  EXPECT_THROW(
      apply_chat_template(ChatTemplateKind::kGemma, {{"user", "x"}, {"system", "y"}}, true), Error);
  EXPECT_THROW(apply_chat_template(ChatTemplateKind::kLlama3, {{"narrator", "x"}}, true), Error);
  EXPECT_THROW(apply_chat_template(ChatTemplateKind::kChatML, {{"", "x"}}, true), Error);
  EXPECT_THROW(apply_chat_template(ChatTemplateKind::kChatML, {}, true), Error);
  try {
    apply_chat_template(ChatTemplateKind::kLlama3, {{"user", "a"}, {"robot", "x"}}, true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("role 'robot' (message 1)"), std::string::npos)
        << e.what();
  }
}

TEST(ChatTemplate, Detect) {
  EXPECT_EQ(detect_chat_template("{{ '<start_of_turn>' + role }}", "llama"),
            ChatTemplateKind::kGemma);
  EXPECT_EQ(detect_chat_template("{{ '<|start_header_id|>' }}", "qwen2"),
            ChatTemplateKind::kLlama3);
  EXPECT_EQ(detect_chat_template("{{ '<|im_start|>' }}", "gemma3"), ChatTemplateKind::kChatML);
  EXPECT_EQ(detect_chat_template("", "gemma3"), ChatTemplateKind::kGemma);
  EXPECT_EQ(detect_chat_template("{% weird %}", "gemma2"), ChatTemplateKind::kGemma);
  EXPECT_EQ(detect_chat_template("", "qwen2"), ChatTemplateKind::kChatML);
  EXPECT_EQ(detect_chat_template("", "llama"), ChatTemplateKind::kChatML);

  TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<|start_header_id|>"};
  v.scores = {0, 0};
  v.token_types = {2, 3};
  auto tok = Tokenizer::create(v);
  EXPECT_EQ(detect_chat_template("", "llama", tok.get()), ChatTemplateKind::kLlama3);
  EXPECT_EQ(detect_chat_template("", "mistral", tok.get()), ChatTemplateKind::kChatML);
}

}  // namespace
}  // namespace kiln::model
