// kiln's chat formats against the publishers' own templates rendered by jinja2
// (tests/fixtures/make_chat_template_cases.py): each template is detected as its family (or
// refused), and every conversation renders byte for byte as Jinja renders it, errors included.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/model/chat_template.h"
#include "kiln/model/jinja_json.h"

namespace kiln::model {
namespace {

using nlohmann::json;

class ChatTemplateReference : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("KILN_TESTDATA");
    if (dir == nullptr) GTEST_SKIP() << "KILN_TESTDATA is not set (run through ctest)";
    const auto path = std::filesystem::path(dir) / "chat_templates" / "cases.json";
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    std::ifstream in(path);
    ordered_ = nlohmann::ordered_json::parse(in).at("templates");
    templates_ = json(ordered_);
    ASSERT_FALSE(templates_.empty());
  }
  json templates_;
  // The same, keys in file order: tools render their keys in the order the client sent them.
  nlohmann::ordered_json ordered_;
};

std::string escaped(const std::string& s) { return json(s).dump(); }

TEST_F(ChatTemplateReference, EachTemplateIsDetectedAsItsFamilyOrRefused) {
  int supported = 0, refused = 0;
  for (const json& t : templates_) {
    const std::string file = t.at("file");
    const std::string text = t.at("text");
    if (t.at("family").is_null()) {
      try {
        const ChatTemplate got = detect_chat_template(text);
        ADD_FAILURE() << file << ": should be refused, detected as "
                      << chat_template_name(got.kind);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("not one kiln renders"), std::string::npos)
            << file << ": " << e.what();
        ++refused;
      }
      continue;
    }
    EXPECT_EQ(chat_template_name(detect_chat_template(text).kind),
              t.at("family").get<std::string>())
        << file;
    ++supported;
  }
  EXPECT_GE(supported, 12);
  EXPECT_GE(refused, 3);
}

TEST_F(ChatTemplateReference, RendersAsTheTemplateDoes) {
  int matched = 0, both_refuse = 0, kiln_refuses = 0;
  for (const json& t : templates_) {
    if (t.at("family").is_null()) continue;
    const std::string file = t.at("file");
    const ChatTemplate tmpl = detect_chat_template(t.at("text").get<std::string>());
    for (const json& c : t.at("cases")) {
      std::vector<ChatMessage> messages;
      for (const json& m : c.at("messages")) messages.push_back({m.at("role"), m.at("content")});
      const bool gen = c.at("add_generation_prompt");
      const std::string where = file + " / " + c.at("conversation").get<std::string>() +
                                (gen ? " (generation prompt)" : "");
      if (c.contains("expected")) {
        try {
          const std::string got = apply_chat_template(tmpl, messages, gen);
          EXPECT_EQ(escaped(got), escaped(c.at("expected"))) << where;
          if (got == c.at("expected")) ++matched;
        } catch (const Error& e) {
          ADD_FAILURE() << where << ": kiln refused (" << e.what() << "), Jinja rendered";
        }
        continue;
      }
      // The template raises ("error") or kiln deliberately refuses what it renders.
      try {
        const std::string got = apply_chat_template(tmpl, messages, gen);
        ADD_FAILURE() << where << ": kiln rendered " << escaped(got) << " but should refuse: "
                      << (c.contains("error") ? c.at("error") : c.at("kiln_refuses"));
      } catch (const Error&) {
        ++(c.contains("error") ? both_refuse : kiln_refuses);
      }
    }
  }
  std::printf("chat templates: %d cases byte for byte, %d refused by both, %d refused by kiln\n",
              matched, both_refuse, kiln_refuses);
  EXPECT_GE(matched, 300);
}

// Tools, assistant tool calls and tool results, as the client would send them (arguments as
// the objects transformers hands the template), against the template rendered with tools.
TEST_F(ChatTemplateReference, RendersToolsAsTheTemplateDoes) {
  int matched = 0, refused = 0;
  for (const auto& t : ordered_) {
    if (!t.contains("tool_cases")) continue;
    const std::string file = t.at("file");
    const ChatTemplate tmpl = detect_chat_template(t.at("text").get<std::string>());
    EXPECT_TRUE(tmpl.takes_tools()) << file;
    EXPECT_EQ(chat_tools_refusal(tmpl), "") << file;
    for (const auto& c : t.at("tool_cases")) {
      std::vector<std::string> tools;
      if (!c.at("tools").is_null()) {
        for (const auto& tool : c.at("tools")) tools.push_back(jinja_tojson(tool));
      }
      std::vector<ChatMessage> messages;
      for (const auto& m : c.at("messages")) {
        ChatMessage msg{m.at("role"), m.at("content").is_null() ? "" : m.at("content")};
        if (m.contains("tool_calls")) {
          for (const auto& call : m.at("tool_calls")) {
            const auto& f = call.at("function");
            msg.tool_calls.push_back(
                {f.at("name"), jinja_tojson(f.at("arguments")), call.value("id", std::string())});
          }
        }
        // The ids as the client sent them: Mistral's templates get them mapped
        // (mistral_call_id.h), as the generator mapped them before rendering.
        msg.tool_call_id = m.value("tool_call_id", std::string());
        messages.push_back(std::move(msg));
      }
      const bool gen = c.at("add_generation_prompt");
      const std::string where = file + " / " + c.at("conversation").get<std::string>() +
                                (gen ? " (generation prompt)" : "");
      if (c.contains("error")) {  // the template raises: so must kiln
        EXPECT_THROW(apply_chat_template(tmpl, messages, gen, tools), Error)
            << where << ": " << c.at("error");
        ++refused;
        continue;
      }
      try {
        const std::string got = apply_chat_template(tmpl, messages, gen, tools);
        EXPECT_EQ(escaped(got), escaped(c.at("expected"))) << where;
        if (got == c.at("expected")) ++matched;
      } catch (const Error& e) {
        ADD_FAILURE() << where << ": kiln refused (" << e.what() << "), Jinja rendered";
      }
    }
  }
  std::printf("chat templates with tools: %d cases byte for byte, %d refused by both\n", matched,
              refused);
  EXPECT_GE(matched, 80);
}

// Every other supported template refuses tools, naming its family, rather than rendering them
// in some other model's format.
TEST_F(ChatTemplateReference, TemplatesWithoutAToolFormatRefuseTools) {
  int refused = 0;
  for (const json& t : templates_) {
    if (t.at("family").is_null() || t.value("tools", false)) continue;
    const ChatTemplate tmpl = detect_chat_template(t.at("text").get<std::string>());
    const std::string family = t.at("family");
    EXPECT_FALSE(tmpl.takes_tools()) << t.at("file");
    try {
      apply_chat_template(tmpl, {{"user", "hi"}}, true, {R"({"type": "function"})"});
      ADD_FAILURE() << t.at("file") << ": rendered tools";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("(" + family + ") has no tool-call format"),
                std::string::npos)
          << e.what();
      // Mistral Small 3.2 and Devstral write a newer [TOOL_CALLS] layout: the refusal says so.
      const std::string text = t.at("text");
      if (text.find("[ARGS]") != std::string::npos) {
        EXPECT_NE(std::string(e.what()).find("[TOOL_CALLS]name[ARGS]"), std::string::npos)
            << e.what();
      }
      ++refused;
    }
    try {
      apply_chat_template(tmpl, {{"user", "hi"}, {"tool", "r"}}, true);
      ADD_FAILURE() << t.at("file") << ": rendered a tool message";
    } catch (const Error&) {
    }
  }
  EXPECT_GE(refused, 9);
}

}  // namespace
}  // namespace kiln::model
