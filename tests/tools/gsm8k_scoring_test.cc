// GSM8K scoring as the benchmarks it is compared with do it. Completion mode follows SGLang's
// few_shot_gsm8k: the last run of digits after commas are removed, read with Python's
// ast.literal_eval (so "007" is invalid); the expected values below are what that Python gives.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kiln/base/error.h"
#include "server_gsm8k.h"

namespace kiln::cli {
namespace {

TEST(Gsm8k, CompletionAnswerIsTheLastDigitRunAsPythonReadsIt) {
  EXPECT_EQ(gsm8k_answer_value("The answer is 1,000."), "1000");
  EXPECT_EQ(gsm8k_answer_value("3 apples and 42"), "42");
  EXPECT_EQ(gsm8k_answer_value("12abc34"), "34");
  EXPECT_EQ(gsm8k_answer_value("000"), "0");
  EXPECT_EQ(gsm8k_answer_value("x 007"), std::nullopt);  // literal_eval refuses leading zeros
  EXPECT_EQ(gsm8k_answer_value("none"), std::nullopt);
}

TEST(Gsm8k, ChatAnswerPrefersTheMarkedLine) {
  EXPECT_EQ(gsm8k_chat_answer_value("so 4 + 5 = 9\n#### 9"), "9");
  EXPECT_EQ(gsm8k_chat_answer_value("#### 1,000"), "1000");
  EXPECT_EQ(gsm8k_chat_answer_value("#### 1000.00"), "1000");
  EXPECT_EQ(gsm8k_chat_answer_value("#### -3"), "-3");
  EXPECT_EQ(gsm8k_chat_answer_value("#### 0.5"), "0.5");
  EXPECT_EQ(gsm8k_chat_answer_value("#### 7\nthen #### 5 and 8"), "5");
  EXPECT_EQ(gsm8k_chat_answer_value("it is \\boxed{12} (not 13)"), "12");
  EXPECT_EQ(gsm8k_chat_answer_value("first 3, then 4"), "4");
  EXPECT_EQ(gsm8k_chat_answer_value("no number here"), std::nullopt);
}

TEST(Gsm8k, PromptsHaveSglangsLayout) {
  const Gsm8kItem shot{"1+1?", "2"};
  const Gsm8kItem q{"2+2?", "4"};
  EXPECT_EQ(gsm8k_few_shot_prefix({shot, shot}),
            "Question: 1+1?\nAnswer: 2\n\nQuestion: 1+1?\nAnswer: 2\n\n");
  EXPECT_EQ(gsm8k_question_prompt(q), "Question: 2+2?\nAnswer:");
  EXPECT_EQ(gsm8k_chat_user_turn(q), std::string("2+2?\n\n") + kGsm8kChatInstruction);
}

TEST(Gsm8k, ReadsJsonlAndRefusesBadLines) {
  const auto dir = std::filesystem::temp_directory_path() / "kiln_gsm8k_test";
  std::filesystem::create_directories(dir);
  const auto good = dir / "good.jsonl";
  std::ofstream(good) << R"({"question": "q1", "answer": "a1"})"
                      << "\n"
                      << R"({"question": "q2", "answer": "a2"})"
                      << "\n";
  const auto items = read_gsm8k_jsonl(good.string());
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1].question, "q2");
  EXPECT_EQ(items[1].answer, "a2");
  const auto bad = dir / "bad.jsonl";
  std::ofstream(bad) << R"({"question": "q1"})"
                     << "\n";
  EXPECT_THROW(read_gsm8k_jsonl(bad.string()), Error);
  EXPECT_THROW(read_gsm8k_jsonl((dir / "missing.jsonl").string()), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::cli
