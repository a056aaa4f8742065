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

}  // namespace kiln::cli
