// The server's TextCodec over a real tokenizer and the chat templates of real models: which tool
// call format each template's family answers with, what a model without a chat format is told,
// and the facts the server bounds prompts with.
#include "kiln/server/tokenizer_codec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"

namespace kiln::server {
namespace {

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;

// <unk> <s> </s> <end_of_turn>, the 256 byte pieces, then a few words.
std::unique_ptr<model::Tokenizer> tiny_tokenizer() {
  model::TokenizerVocab v;
  v.model = "llama";
  v.pre = "default";
  auto add = [&](std::string text, int32_t type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(0);
    v.token_types.push_back(type);
  };
  add("<unk>", kUnknown);
  add("<s>", kControl);
  add("</s>", kControl);
  add("<end_of_turn>", kControl);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), kByte);
  for (const char* w : {"h", "i", "hi", "\xE2\x96\x81hi", "\xE2\x96\x81hello_there"})
    add(w, kNormal);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  return model::Tokenizer::create(std::move(v));
}

// The templates of tests/fixtures/chat_templates, by file name (generated into KILN_TESTDATA).
std::map<std::string, std::string> fixture_templates() {
  const char* dir = std::getenv("KILN_TESTDATA");
  if (dir == nullptr) return {};
  std::ifstream in(std::filesystem::path(dir) / "chat_templates" / "cases.json");
  if (!in) return {};
  std::map<std::string, std::string> out;
  const nlohmann::json cases = nlohmann::json::parse(in);
  for (const auto& t : cases.at("templates"))
    out[t.at("file").get<std::string>()] = t.at("text").get<std::string>();
  return out;
}

TEST(TokenizerCodec, EachTemplateFamilyAnswersWithItsToolCallFormat) {
  const auto templates = fixture_templates();
  if (templates.empty()) GTEST_SKIP() << "KILN_TESTDATA is not set (run through ctest)";
  const auto tok = tiny_tokenizer();
  const std::map<std::string, ToolCallFormat> expected = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::kHermes},
      {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::kHermes},
      {"Qwen-Qwen2.5-Coder-1.5B-Instruct.jinja", ToolCallFormat::kHermesFenced},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlamaJson},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::kLlamaJson},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::kMistral},
      {"mistralai-Mistral-Large-Instruct-2407.jinja", ToolCallFormat::kMistral},
      {"google-gemma-3-it.jinja", ToolCallFormat::kNone},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ToolCallFormat::kNone},
  };
  for (const auto& [file, format] : expected) {
    ASSERT_TRUE(templates.count(file)) << file;
    TokenizerCodec codec(*tok, ChatSupport::from_template(templates.at(file)));
    EXPECT_EQ(codec.tool_call_format(), format) << file;
    // A format that takes tools has no refusal; one that does not says why.
    EXPECT_EQ(codec.tools_refusal().empty(), format != ToolCallFormat::kNone) << file;
    EXPECT_EQ(codec.specials().chat_template, templates.at(file)) << file;
    EXPECT_FALSE(codec.render_chat({{"user", "hi"}}, {}).empty()) << file;
  }
}

TEST(TokenizerCodec, AModelWithoutAChatFormatIsServedAndChatIsRefusedWithTheReason) {
  const auto tok = tiny_tokenizer();
  const ChatSupport chat = ChatSupport::from_template("{{ no_such_family }}");
  ASSERT_FALSE(chat.chat_template);
  ASSERT_FALSE(chat.unavailable_reason.empty());
  TokenizerCodec codec(*tok, chat);
  try {
    codec.render_chat({{"user", "hi"}}, {});
    ADD_FAILURE() << "render_chat should refuse";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("chat is unavailable for this model"), std::string::npos) << what;
    EXPECT_NE(what.find(chat.unavailable_reason), std::string::npos) << what;
  }
  EXPECT_NE(codec.tools_refusal().find(chat.unavailable_reason), std::string::npos);
  EXPECT_EQ(codec.tool_call_format(), ToolCallFormat::kNone);
  // Completions still work.
  EXPECT_EQ(codec.decode(codec.encode("hi", false), false), "hi");
}

TEST(TokenizerCodec, PromptsParseControlTokensAndTheLongestTokenBoundsThem) {
  const auto tok = tiny_tokenizer();
  TokenizerCodec codec(*tok, ChatSupport::from_template(""));
  const std::vector<int32_t> ids = codec.encode("hi<end_of_turn>", /*add_special=*/true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 1);  // BOS
  EXPECT_EQ(ids.back(), 3);   // the control token, not its characters
  EXPECT_EQ(codec.decode(ids, /*skip_special=*/true), "hi");
  // "▁hello_there" is the longest piece: 3 bytes of U+2581 and 11 more.
  EXPECT_EQ(codec.max_token_bytes(), 14u);
  EXPECT_EQ(codec.vocab_size(), tok->vocab_size());
  const TextCodec::Specials s = codec.specials();
  EXPECT_EQ(s.bos, "<s>");
  EXPECT_EQ(s.eos, "</s>");
  EXPECT_EQ(s.pad, "");
}

}  // namespace
}  // namespace kiln::server
