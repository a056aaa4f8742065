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

const char* const kGsm8kChatInstruction =
    "Solve the problem step by step. Write the final answer as a plain number on the last "
    "line, in the form \"#### <number>\".";

std::string gsm8k_chat_user_turn(const Gsm8kItem& item) {
  return item.question + "\n\n" + kGsm8kChatInstruction;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A number starting at text[i] (a digit, or '-' before one): digits with thousands commas, an
// optional fraction. Returns its canonical form and sets `end` past it.
std::string read_number(const std::string& text, size_t i, size_t& end) {
  std::string sign;
  if (text[i] == '-') {
    sign = "-";
    ++i;
  }
  std::string whole;
  for (; i < text.size(); ++i) {
    if (is_digit(text[i])) {
      whole.push_back(text[i]);
    } else if (text[i] == ',' && i + 1 < text.size() && is_digit(text[i + 1])) {
      continue;  // "1,000"
    } else {
      break;
    }
  }
  std::string frac;
  if (i + 1 < text.size() && text[i] == '.' && is_digit(text[i + 1])) {
    for (++i; i < text.size() && is_digit(text[i]); ++i) frac.push_back(text[i]);
  }
  end = i;
  while (!frac.empty() && frac.back() == '0') frac.pop_back();  // "18.00" is 18
  const size_t nz = whole.find_first_not_of('0');
  whole = nz == std::string::npos ? "0" : whole.substr(nz);
  if (whole == "0" && frac.empty()) sign.clear();  // "-0" is 0
  return sign + whole + (frac.empty() ? "" : "." + frac);
}

bool number_starts_at(const std::string& text, size_t i) {
  if (is_digit(text[i])) return true;
  return text[i] == '-' && i + 1 < text.size() && is_digit(text[i + 1]) &&
         (i == 0 || !is_digit(text[i - 1]));
}

// Every number in text[begin, end), in order.
std::vector<std::string> numbers_in(const std::string& text, size_t begin, size_t end) {
  std::vector<std::string> out;
  for (size_t i = begin; i < end && i < text.size();) {
    if (number_starts_at(text, i) && (i == 0 || !is_digit(text[i - 1]))) {
      size_t next = i;
      out.push_back(read_number(text, i, next));
      i = next;
    } else {
      ++i;
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> gsm8k_chat_answer_value(const std::string& text) {
  if (const size_t hashes = text.rfind("####"); hashes != std::string::npos) {
    auto after = numbers_in(text, hashes + 4, text.size());
    if (!after.empty()) return after.front();
  }
  if (const size_t boxed = text.rfind("\\boxed{"); boxed != std::string::npos) {
    const size_t close = text.find('}', boxed);
    auto inside = numbers_in(text, boxed + 7, close == std::string::npos ? text.size() : close);
    if (!inside.empty()) return inside.back();
  }
  auto all = numbers_in(text, 0, text.size());
  if (all.empty()) return std::nullopt;
  return all.back();
}

}  // namespace kiln::cli
