// `kiln eval gsm8k`: few-shot GSM8K against any running server (kiln, SGLang, or anything with
// SGLang's /generate or OpenAI's /v1/completions), prompted and scored as SGLang's
// few_shot_gsm8k benchmark, printing the same four result lines.
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
#include "http_client.h"
#include "kiln/base/error.h"
#include "server_gsm8k.h"
#include "server_progress_bar.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct EvalOptions {
  std::string url = "http://127.0.0.1:30000";
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

// The shared GSM8K copy: <ancestor>/shared/data/gsm8k/train.jsonl for the first ancestor of
// the executable (or the working directory) that has one.
std::string default_data_path() {
  std::vector<fs::path> starts;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  starts.push_back(fs::current_path(ec));
  for (fs::path dir : starts) {
    for (; !dir.empty(); dir = dir.parent_path()) {
      fs::path candidate = dir / "shared" / "data" / "gsm8k" / "train.jsonl";
      if (fs::exists(candidate, ec)) return candidate.string();
      if (dir == dir.parent_path()) break;
    }
  }
  return {};
}

struct Outcome {
  std::string completion;
  int completion_tokens = 0;
  std::string error;
};

Outcome ask(JsonClient& client, const EvalOptions& o, const std::string& model,
            const std::string& prompt) {
  static const json kStop = {"Question", "Assistant:", "<|separator|>"};
  Outcome out;
  try {
    if (o.api == "native") {
      json r = client.post(
          "/generate",
          {{"text", prompt},
           {"sampling_params",
            {{"max_new_tokens", o.max_new_tokens}, {"temperature", 0}, {"stop", kStop}}}});
      out.completion = r.at("text").get<std::string>();
      out.completion_tokens = r.at("meta_info").at("completion_tokens").get<int>();
    } else {
      json r = client.post("/v1/completions", {{"model", model},
                                               {"prompt", prompt},
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

void run_gsm8k(const EvalOptions& o) {
  KILN_CHECK(o.api == "native" || o.api == "openai", "--api must be native or openai");
  std::string data_path = o.data_path.empty() ? default_data_path() : o.data_path;
  KILN_CHECK(!data_path.empty(),
             "no GSM8K data found (shared/data/gsm8k/train.jsonl); pass --data-path");
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
    auto v = gsm8k_answer_value(q.answer);
    KILN_CHECK(v.has_value(), "a reference answer has no number: {}", q.answer);
    labels.push_back(*v);
  }
  const std::string prefix = gsm8k_few_shot_prefix(shots);

  std::string model = "default";
  if (o.api == "openai") {
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
        outcomes[i] = ask(client, o, model, prefix + gsm8k_question_prompt(questions[i]));
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
    auto pred = gsm8k_answer_value(oc.completion);
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
      "gsm8k", "Few-shot GSM8K accuracy, prompted and scored like SGLang's few_shot_gsm8k");
  g->add_option("--url", opts->url, "Server URL")->capture_default_str();
  g->add_option("--api", opts->api, "native (/generate) or openai (/v1/completions)")
      ->check(CLI::IsMember({"native", "openai"}))
      ->capture_default_str();
  g->add_option("--api-key", opts->api_key, "Bearer token for the server");
  g->add_option("--data-path", opts->data_path,
                "GSM8K JSONL (default: shared/data/gsm8k/train.jsonl above the kiln binary)");
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
