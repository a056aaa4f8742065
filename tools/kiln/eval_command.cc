// `kiln eval gsm8k`: GSM8K against any running server (kiln, SGLang, llama-server, or anything
// with SGLang's /generate or OpenAI's endpoints), printing the four result lines of SGLang's
// few_shot_gsm8k benchmark. Completion mode prompts and scores as that benchmark does; chat
// mode asks an instruct model through /v1/chat/completions in its own template.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"
#include "kiln/base/error.h"
#include "kiln/server/json_client.h"
#include "server_gsm8k.h"
#include "server_progress_bar.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using server::JsonClient;

struct EvalOptions {
  std::string url = "http://127.0.0.1:30000";
  std::string mode = "completion";
  std::string api = "native";
  std::string api_key;
  std::string data_path;
  std::string shots_path;
  int num_shots = 5;
  int num_questions = 200;
  int parallel = 32;
  int max_new_tokens = 512;
  std::string output_jsonl;
};

// The GSM8K train split committed with kiln (data/gsm8k, MIT).
std::string default_data_path() { return std::string(KILN_SOURCE_DIR) + "/data/gsm8k/train.jsonl"; }

// One question as the server is asked it: a completion prompt, or chat messages.
struct Question {
  std::string prompt;
  json messages;
};

struct Outcome {
  std::string completion;
  int completion_tokens = 0;
  std::string error;
};

Outcome ask(JsonClient& client, const EvalOptions& o, const std::string& model, const Question& q) {
  static const json kStop = {"Question", "Assistant:", "<|separator|>"};
  Outcome out;
  try {
    if (o.mode == "chat") {
      // No stop strings: the model's end of turn ends the reply.
      json r = client.post("/v1/chat/completions", {{"model", model},
                                                    {"messages", q.messages},
                                                    {"max_tokens", o.max_new_tokens},
                                                    {"temperature", 0}});
      const json& content = r.at("choices").at(0).at("message").at("content");
      out.completion = content.is_string() ? content.get<std::string>() : "";
      out.completion_tokens = r.at("usage").at("completion_tokens").get<int>();
    } else if (o.api == "native") {
      json r = client.post(
          "/generate",
          {{"text", q.prompt},
           {"sampling_params",
            {{"max_new_tokens", o.max_new_tokens}, {"temperature", 0}, {"stop", kStop}}}});
      out.completion = r.at("text").get<std::string>();
      out.completion_tokens = r.at("meta_info").at("completion_tokens").get<int>();
    } else {
      json r = client.post("/v1/completions", {{"model", model},
                                               {"prompt", q.prompt},
                                               {"max_tokens", o.max_new_tokens},
                                               {"temperature", 0},
                                               {"stop", kStop}});
      out.completion = r.at("choices").at(0).at("text").get<std::string>();
      out.completion_tokens = r.at("usage").at("completion_tokens").get<int>();
    }
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

// Completion mode: SGLang's few-shot prompt. Chat mode: the shots as earlier exchanges, then
// the question, each user turn carrying the final-answer instruction (server_gsm8k.h).
Question make_question(const EvalOptions& o, const std::vector<Gsm8kItem>& shots,
                       const std::string& prefix, const Gsm8kItem& item) {
  Question q;
  if (o.mode != "chat") {
    q.prompt = prefix + gsm8k_question_prompt(item);
    return q;
  }
  q.messages = json::array();
  for (const Gsm8kItem& s : shots) {
    q.messages.push_back({{"role", "user"}, {"content", gsm8k_chat_user_turn(s)}});
    q.messages.push_back({{"role", "assistant"}, {"content", s.answer}});
  }
  q.messages.push_back({{"role", "user"}, {"content", gsm8k_chat_user_turn(item)}});
  return q;
}

// The answer in a reply or a reference answer, as the mode reads it.
std::optional<std::string> answer_value(const EvalOptions& o, const std::string& text) {
  return o.mode == "chat" ? gsm8k_chat_answer_value(text) : gsm8k_answer_value(text);
}

void run_gsm8k(const EvalOptions& o) {
  KILN_CHECK(o.api == "native" || o.api == "openai", "--api must be native or openai");
  KILN_CHECK(o.mode == "completion" || o.mode == "chat", "--mode must be completion or chat");
  std::string data_path = o.data_path.empty() ? default_data_path() : o.data_path;
  auto lines = read_gsm8k_jsonl(data_path);
  std::vector<Gsm8kItem> shots;
  size_t first_question = 0;
  if (!o.shots_path.empty()) {
    shots = read_gsm8k_jsonl(o.shots_path);
    KILN_CHECK(static_cast<int>(shots.size()) >= o.num_shots, "{} has {} examples, fewer than {}",
               o.shots_path, shots.size(), o.num_shots);
    shots.resize(o.num_shots);
  } else {
    // Shots come from the head of the data; the questions follow them, so no question is
    // answered with its own worked answer in the prompt.
    KILN_CHECK(static_cast<int>(lines.size()) > o.num_shots, "{} has only {} lines", data_path,
               lines.size());
    shots.assign(lines.begin(), lines.begin() + o.num_shots);
    first_question = o.num_shots;
  }
  size_t n = std::min(lines.size() - first_question, static_cast<size_t>(o.num_questions));
  std::vector<Gsm8kItem> questions(lines.begin() + first_question,
                                   lines.begin() + first_question + n);
  std::vector<std::string> labels;
  for (const auto& q : questions) {
    auto v = answer_value(o, q.answer);
    KILN_CHECK(v.has_value(), "a reference answer has no number: {}", q.answer);
    labels.push_back(*v);
  }
  const std::string prefix = gsm8k_few_shot_prefix(shots);

  std::string model = "default";
  if (o.api == "openai" || o.mode == "chat") {
    JsonClient c(o.url, o.api_key);
    json models = c.get("/v1/models");
    if (models.contains("data") && !models["data"].empty()) {
      model = models["data"][0].value("id", model);
    }
  }

  std::vector<Outcome> outcomes(n);
  std::atomic<size_t> next{0};
  ClientProgressBar bar("gsm8k", static_cast<int64_t>(n));
  auto tic = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  int threads = std::max(1, std::min<int>(o.parallel, static_cast<int>(n)));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      JsonClient client(o.url, o.api_key);
      for (size_t i; (i = next.fetch_add(1)) < n;) {
        outcomes[i] = ask(client, o, model, make_question(o, shots, prefix, questions[i]));
        bar.advance();
      }
    });
  }
  for (auto& w : workers) w.join();
  double latency = std::chrono::duration<double>(std::chrono::steady_clock::now() - tic).count();
  bar.finish();

  size_t correct = 0, invalid = 0, failed = 0;
  int64_t output_tokens = 0;
  std::ofstream jsonl;
  if (!o.output_jsonl.empty()) {
    jsonl.open(o.output_jsonl);
    KILN_CHECK(jsonl, "cannot write {}", o.output_jsonl);
  }
  for (size_t i = 0; i < n; ++i) {
    const Outcome& oc = outcomes[i];
    auto pred = answer_value(o, oc.completion);
    bool ok = pred && *pred == labels[i];
    correct += ok;
    invalid += !pred;
    failed += !oc.error.empty();
    output_tokens += oc.completion_tokens;
    if (jsonl) {
      json row = {{"index", first_question + i},
                  {"question", questions[i].question},
                  {"label", labels[i]},
                  {"pred", pred ? json(*pred) : json(nullptr)},
                  {"correct", ok},
                  {"completion", oc.completion},
                  {"completion_tokens", oc.completion_tokens}};
      if (!oc.error.empty()) row["error"] = oc.error;
      // What the server was asked, so a run can be replayed and its prompts checked.
      const Question q = make_question(o, shots, prefix, questions[i]);
      if (o.mode == "chat") {
        row["messages"] = q.messages;
      } else {
        row["prompt"] = q.prompt;
      }
      jsonl << row.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    }
  }
  if (failed > 0) {
    std::fprintf(stderr, "kiln eval: %zu of %zu requests failed (first: %s)\n", failed, n, [&] {
      for (const auto& oc : outcomes)
        if (!oc.error.empty()) return oc.error.c_str();
      return "";
    }());
  }
  double dn = n > 0 ? static_cast<double>(n) : 1.0;
  std::printf("Accuracy: %.3f\n", static_cast<double>(correct) / dn);
  std::printf("Invalid: %.3f\n", static_cast<double>(invalid) / dn);
  std::printf("Latency: %.3f s\n", latency);
  std::printf("Output throughput: %.3f token/s\n", static_cast<double>(output_tokens) / latency);
  std::fflush(stdout);
  KILN_CHECK(failed < n || n == 0, "every request failed: is a server running at {}?", o.url);
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto* eval = app.add_subcommand("eval", "Evaluate a running server on a benchmark");
  eval->require_subcommand(1);
  auto opts = std::make_shared<EvalOptions>();
  auto* g = eval->add_subcommand(
      "gsm8k",
      "GSM8K accuracy: few-shot completion prompts scored like SGLang's few_shot_gsm8k, or "
      "(--mode chat) an instruct model's chat template");
  g->add_option("--url", opts->url, "Server URL")->capture_default_str();
  g->add_option("--mode", opts->mode,
                "completion: few-shot prompt text (/generate or /v1/completions); chat: "
                "/v1/chat/completions, shots as earlier turns, a final-answer instruction")
      ->check(CLI::IsMember({"completion", "chat"}))
      ->capture_default_str();
  g->add_option("--api", opts->api,
                "Completion mode: native (/generate) or openai (/v1/completions)")
      ->check(CLI::IsMember({"native", "openai"}))
      ->capture_default_str();
  g->add_option("--api-key", opts->api_key, "Bearer token for the server");
  g->add_option("--data-path", opts->data_path,
                "GSM8K JSONL (default: the train split in kiln's data/gsm8k)");
  g->add_option("--shots-path", opts->shots_path,
                "JSONL with the few-shot examples (default: the head of --data-path)");
  g->add_option("--num-shots", opts->num_shots, "Few-shot examples")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  g->add_option("--num-questions", opts->num_questions, "Questions to ask")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  g->add_option("--parallel", opts->parallel, "Concurrent requests")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  g->add_option("--max-new-tokens", opts->max_new_tokens, "Tokens per answer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  g->add_option("--output-jsonl", opts->output_jsonl, "Write per-question results here");
  g->callback([opts] { run_gsm8k(*opts); });
}

}  // namespace kiln::cli
