// GSM8K few-shot prompting and scoring exactly as SGLang's few_shot_gsm8k benchmark does it:
// shots are "Question: q\nAnswer: a" each followed by a blank line, the question is
// "Question: q\nAnswer:", and an answer is the last run of digits in the text after commas are
// removed (a run Python's literal_eval would reject, such as "007", counts as invalid).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

struct Gsm8kItem {
  std::string question;
  std::string answer;
};

// Reads a GSM8K JSONL file ({"question": ..., "answer": ...} per line).
std::vector<Gsm8kItem> read_gsm8k_jsonl(const std::string& path);

std::string gsm8k_few_shot_prefix(const std::vector<Gsm8kItem>& shots);
std::string gsm8k_question_prompt(const Gsm8kItem& item);

// The answer as a canonical digit string, or nullopt (invalid).
std::optional<std::string> gsm8k_answer_value(const std::string& text);

// Chat mode (an instruct model behind an OpenAI chat endpoint, prompted in its own template).
// Each question is one user turn: the question, a blank line and kGsm8kChatInstruction, which
// asks for the final answer on a last line "#### <number>" (the reference answers' own form).
// Few-shot examples are earlier exchanges: the example's user turn and its reference answer
// (worked solution and "#### N") as the assistant's reply.
extern const char* const kGsm8kChatInstruction;
std::string gsm8k_chat_user_turn(const Gsm8kItem& item);

// The answer in a chat reply, as a canonical number ("1,000" and "1000.00" are "1000", "-3"
// keeps its sign, "0.5" stays): the first number after the last "####", else the number in
// the last \boxed{...}, else the last number in the text. nullopt: the reply has no number.
std::optional<std::string> gsm8k_chat_answer_value(const std::string& text);

}  // namespace kiln::cli
