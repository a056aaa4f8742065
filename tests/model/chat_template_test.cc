#include "kiln/model/chat_template.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"

namespace kiln::model {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."},
    {"user", "Hi there "},
    {"assistant", "Hello!"},
    {"user", "2+2?"},
};

TEST(ChatTemplate, Gemma) {
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kGemma3, kConversation, true),
            "<start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\n2+2?<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kGemma, {{"user", "Hi"}}, false),
            "<start_of_turn>user\nHi<end_of_turn>\n");
  // Gemma 3's template writes a lone system message nowhere; Gemma 1 and 2 have no system role.
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kGemma3, {{"system", "S"}}, true),
            "<start_of_turn>model\n");
  EXPECT_THROW(apply_chat_template(ChatTemplateKind::kGemma, kConversation, true), Error);
}

TEST(ChatTemplate, Llama3) {
  EXPECT_EQ(apply_chat_template(ChatTemplateKind::kLlama3, kConversation, true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// A message ending in the first two bytes of a three-byte space (E2 80) is trimmed without
// reading past its end (it threw std::out_of_range; found by the chat_template fuzzer).
TEST(ChatTemplate, TrimsTextEndingInATruncatedMultiByteSpace) {
  const std::string out =
      apply_chat_template(ChatTemplateKind::kLlama3, {{"user", " \xE2\x80"}}, true);
  EXPECT_NE(out.find("\n\n\xE2\x80<|eot_id|>"), std::string::npos) << out;
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

TEST(ChatTemplate, DetectReadsOnlyTheTemplateText) {
  EXPECT_EQ(detect_chat_template("{{ '<start_of_turn>' + role }}").kind, ChatTemplateKind::kGemma);
  EXPECT_EQ(detect_chat_template("{{ '<|start_header_id|>' }}").kind, ChatTemplateKind::kLlama3);
  EXPECT_EQ(detect_chat_template("{{ '<|im_start|>' }}").kind, ChatTemplateKind::kChatML);
  EXPECT_EQ(detect_chat_template("{{ '[INST]' + m + '[/INST]' }}").kind,
            ChatTemplateKind::kMistralV3Tekken);
  const ChatTemplate qwen = detect_chat_template(
      "{{- '<|im_start|>system\\nYou are Qwen, a \\'model\\'.<|im_end|>\\n' }}");
  EXPECT_EQ(qwen.default_system, "You are Qwen, a 'model'.");
}

TEST(ChatTemplate, NoTemplateOrAnUnknownOneIsRefusedWithTheReason) {
  try {
    detect_chat_template("");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "the model file has no chat template (tokenizer.chat_template), so kiln cannot "
              "format chat messages for it; send plain-text prompts instead");
  }
  try {
    detect_chat_template("{% for m in messages %}{{ '<|User|>' + m['content'] }}{% endfor %}");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "the model's chat template is not one kiln renders (starts: '{% for m in messages "
        "%}{{ '<|User|>' + m...'); supported: gemma, gemma3, llama3, llama3.1, chatml, qwen3, "
        "mistral-v1, mistral-v3, mistral-v3-tekken, mistral-v7, mistral-v7-tekken, phi3, "
        "command-r, deepseek-v2");
  }
}

}  // namespace
}  // namespace kiln::model
