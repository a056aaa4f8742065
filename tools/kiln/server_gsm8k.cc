#include "server_gsm8k.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"

namespace kiln::cli {

std::vector<Gsm8kItem> read_gsm8k_jsonl(const std::string& path) {
  std::ifstream in(path);
  KILN_CHECK(in, "cannot open GSM8K data {}", path);
  std::vector<Gsm8kItem> items;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      fail("{}:{}: not JSON: {}", path, line_no, e.what());
    }
    KILN_CHECK(j.is_object() && j.contains("question") && j.contains("answer") &&
                   j["question"].is_string() && j["answer"].is_string(),
               "{}:{}: expected {{\"question\": str, \"answer\": str}}", path, line_no);
    items.push_back({j["question"].get<std::string>(), j["answer"].get<std::string>()});
  }
  return items;
}

std::string gsm8k_question_prompt(const Gsm8kItem& item) {
  return "Question: " + item.question + "\nAnswer:";
}

std::string gsm8k_few_shot_prefix(const std::vector<Gsm8kItem>& shots) {
  std::string out;
  for (const auto& s : shots) out += gsm8k_question_prompt(s) + " " + s.answer + "\n\n";
  return out;
}

std::optional<std::string> gsm8k_answer_value(const std::string& text) {
  std::string last;
  std::string run;
  for (char c : text) {
    if (c == ',') continue;  // "1,000" is 1000
    if (c >= '0' && c <= '9') {
      run.push_back(c);
    } else {
      if (!run.empty()) last = run;
      run.clear();
    }
  }
  if (!run.empty()) last = run;
  if (last.empty()) return std::nullopt;
  // Python 3 rejects integer literals with leading zeros except all-zero ones.
  size_t nz = last.find_first_not_of('0');
  if (nz == std::string::npos) return std::string("0");
  if (nz > 0) return std::nullopt;
  return last;
}

}  // namespace kiln::cli
