// `kiln bench serving`: an online serving benchmark against a running server, measured like
// SGLang's bench_serving: N streaming requests with random prompts of --input-len tokens, each
// generating exactly --output-len tokens (ignore_eos), sent all at once, at a Poisson
// --request-rate, and/or capped at --max-concurrency in flight. --dataset shared-prefix puts
// one of --shared-prefix-groups random "system prompts" of --shared-prefix-len tokens before
// each prompt, the groups taking turns in the order of sending (what the prefix cache and
// --schedule-policy lpm are for).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <semaphore>
#include <thread>

#include "kiln/base/error.h"
#include "kiln/server/json_client.h"
#include "order_stats.h"
#include "server_bench_stats.h"
#include "server_progress_bar.h"

namespace kiln::cli {

// Registered under `kiln bench` by bench_command.cc.
void add_bench_serving_command(CLI::App& bench);

namespace {

using nlohmann::json;
using server::JsonClient;
using Clock = std::chrono::steady_clock;

struct ServingOptions {
  std::string url = "http://127.0.0.1:30000";
  std::string api = "native";
  std::string api_key;
  int num_prompts = 100;
  int input_len = 128;
  int output_len = 128;
  double request_rate = std::numeric_limits<double>::infinity();
  int max_concurrency = 0;  // 0: unlimited
  std::string prompt_kind = "ids";
  std::string dataset = "random";  // or shared-prefix
  int shared_prefix_groups = 8;
  int shared_prefix_len = 512;
  int64_t vocab_size = 0;
  uint64_t seed = 1;
  bool disable_ignore_eos = false;
  std::string json_path;
  std::string compare_url;  // --compare-url: a second server, measured in alternating rounds
  int rounds = 1;
};

std::vector<std::vector<int32_t>> random_prompts(const ServingOptions& o, int64_t vocab) {
  std::mt19937_64 rng(o.seed);
  // Skip the lowest ids, where tokenizers keep their control tokens (pad, bos, eos, ...).
  int64_t lo = std::min<int64_t>(vocab / 2, 256);
  std::uniform_int_distribution<int64_t> dist(lo, vocab - 1);
  const auto random_ids = [&](int n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& t : ids) t = static_cast<int32_t>(dist(rng));
    return ids;
  };
  std::vector<std::vector<int32_t>> out(o.num_prompts);
  for (auto& p : out) p = random_ids(o.input_len);
  if (o.dataset == "shared-prefix") {
    // Drawn after the prompts, so the prompts are the same ones the random dataset sends.
    std::vector<std::vector<int32_t>> prefixes;
    for (int g = 0; g < o.shared_prefix_groups; ++g)
      prefixes.push_back(random_ids(o.shared_prefix_len));
    for (size_t i = 0; i < out.size(); ++i) {
      const auto& prefix = prefixes[i % prefixes.size()];
      out[i].insert(out[i].begin(), prefix.begin(), prefix.end());
    }
  }
  return out;
}

json request_body(const ServingOptions& o, const json& prompt, const std::string& model) {
  if (o.api == "native") {
    json body = {{"sampling_params",
                  {{"max_new_tokens", o.output_len},
                   {"temperature", 0},
                   {"ignore_eos", !o.disable_ignore_eos}}},
                 {"stream", true}};
    body[prompt.is_string() ? "text" : "input_ids"] = prompt;
    return body;
  }
  return {{"model", model},
          {"prompt", prompt},
          {"max_tokens", o.output_len},
          {"temperature", 0},
          {"ignore_eos", !o.disable_ignore_eos},
          {"stream", true},
          {"stream_options", {{"include_usage", true}}}};
}

ServingRequestRecord run_one(const ServingOptions& o, const std::string& url, const json& body) {
  ServingRequestRecord rec;
  JsonClient client(url, o.api_key);
  auto start = Clock::now();
  auto last = start;
  bool first = true;
  int seen_tokens = 0;
  try {
    client.post_stream(
        o.api == "native" ? "/generate" : "/v1/completions", body,
        [&](const json& ev, Clock::time_point t) {
          bool has_output = false;
          if (o.api == "native") {
            const auto& m = ev.at("meta_info");
            int done = m.value("completion_tokens", 0);
            has_output = done > seen_tokens;
            seen_tokens = std::max(seen_tokens, done);
            rec.output_len = done;
            rec.prompt_len = m.value("prompt_tokens", 0);
            rec.cached_len = m.value("cached_tokens", 0);
          } else {
            if (ev.contains("usage") && ev["usage"].is_object()) {
              const json& u = ev["usage"];
              rec.output_len = u.value("completion_tokens", 0);
              rec.prompt_len = u.value("prompt_tokens", 0);
              rec.cached_len =
                  u.value("prompt_tokens_details", json::object()).value("cached_tokens", 0);
            }
            const auto& ch = ev.value("choices", json::array());
            has_output = !ch.empty() && !ch[0].value("text", "").empty();
          }
          if (!has_output) return;
          double dt = std::chrono::duration<double>(t - last).count();
          if (first) {
            rec.ttft = std::chrono::duration<double>(t - start).count();
            first = false;
          } else {
            rec.itl.push_back(dt);
          }
          last = t;
        });
    rec.latency = std::chrono::duration<double>(Clock::now() - start).count();
    rec.success = !first;
    if (first) rec.error = "no output";
  } catch (const std::exception& e) {
    rec.error = e.what();
  }
  return rec;
}

// The prompts and model name a run sends, fetched once from the first server (both servers of a
// comparison get the same requests).
struct Workload {
  std::vector<json> prompts;
  std::string model = "default";
};

Workload prepare(const ServingOptions& o) {
  KILN_CHECK(o.api == "native" || o.api == "openai", "--api must be native or openai");
  KILN_CHECK(o.request_rate > 0, "--request-rate must be positive");
  JsonClient probe(o.url, o.api_key);
  int64_t vocab = o.vocab_size;
  if (vocab == 0) {
    json info = probe.get("/get_model_info");
    vocab = info.value("vocab_size", int64_t{0});
    KILN_CHECK(vocab > 0, "the server does not report vocab_size; pass --vocab-size");
  }
  Workload w;
  if (o.api == "openai") {
    json models = probe.get("/v1/models");
    if (models.contains("data") && !models["data"].empty()) {
      w.model = models["data"][0].value("id", w.model);
    }
  }
  for (auto& p : random_prompts(o, vocab)) {
    if (o.prompt_kind == "text") {
      w.prompts.push_back(probe.post("/detokenize", {{"tokens", p}}).at("text"));
    } else {
      w.prompts.push_back(p);
    }
  }
  return w;
}

ServingResult run_against(const ServingOptions& o, const std::string& url, const Workload& w,
                          const std::string& label) {
  std::vector<ServingRequestRecord> records(o.num_prompts);
  std::counting_semaphore<1 << 20> slots(o.max_concurrency > 0 ? o.max_concurrency : (1 << 20));
  std::mt19937_64 rng(o.seed + 1);
  std::exponential_distribution<double> gap(std::isinf(o.request_rate) ? 1.0 : o.request_rate);
  ClientProgressBar bar(label, o.num_prompts);
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int i = 0; i < o.num_prompts; ++i) {
    slots.acquire();
    json body = request_body(o, w.prompts[i], w.model);
    threads.emplace_back([&, i, body = std::move(body)] {
      records[i] = run_one(o, url, body);
      slots.release();
      bar.advance();
    });
    if (!std::isinf(o.request_rate)) {
      std::this_thread::sleep_for(std::chrono::duration<double>(gap(rng)));
    }
  }
  for (auto& t : threads) t.join();
  double duration = std::chrono::duration<double>(Clock::now() - start).count();
  bar.finish();
  for (const auto& r : records) {
    if (!r.success) {
      std::fprintf(stderr, "kiln bench serving: a request to %s failed: %s\n", url.c_str(),
                   r.error.c_str());
      break;
    }
  }
  ServingResult result = compute_serving_result(records, duration);
  KILN_CHECK(result.completed > 0, "no request to {} succeeded", url);
  return result;
}

// --compare-url: both servers, the same requests, rounds alternating which goes first; each
// round's output throughput, P99 ITL and prefix cache hit rate, then medians, their ranges and
// the B/A throughput ratio's spread.
void compare_rounds(const ServingOptions& o, const Workload& w) {
  std::vector<double> a_tok, b_tok, ratio, a_itl, b_itl, a_hit, b_hit;
  std::printf("%5s %6s | %12s %10s %6s | %12s %10s %6s | %6s\n", "round", "first", "A out tok/s",
              "A P99 ITL", "A hit", "B out tok/s", "B P99 ITL", "B hit", "B/A");
  for (int r = 1; r <= o.rounds; ++r) {
    const bool b_first = r % 2 == 0;
    // Every round sends the same prompts: without a flush, later rounds would be served from
    // the prefix cache and measure something else than the first.
    for (const std::string* url : {&o.url, &o.compare_url}) {
      JsonClient(*url, o.api_key).post_expect_ok("/flush_cache");
    }
    ServingResult a, b;
    if (b_first) b = run_against(o, o.compare_url, w, "B");
    a = run_against(o, o.url, w, "A");
    if (!b_first) b = run_against(o, o.compare_url, w, "B");
    a_tok.push_back(a.output_throughput);
    b_tok.push_back(b.output_throughput);
    ratio.push_back(b.output_throughput / a.output_throughput);
    a_itl.push_back(a.itl_ms.p99);
    b_itl.push_back(b.itl_ms.p99);
    a_hit.push_back(a.prefix_cache_hit_rate);
    b_hit.push_back(b.prefix_cache_hit_rate);
    std::printf("%5d %6s | %12.1f %8.1f ms %5.1f%% | %12.1f %8.1f ms %5.1f%% | %5.2fx\n", r,
                b_first ? "B" : "A", a.output_throughput, a.itl_ms.p99, 100 * a_hit.back(),
                b.output_throughput, b.itl_ms.p99, 100 * b_hit.back(), ratio.back());
    std::fflush(stdout);
  }
  std::printf(
      "A = %s, B = %s; medians over %d rounds: A %.1f tok/s (P99 ITL %.1f ms), B %.1f "
      "tok/s (P99 ITL %.1f ms), B/A %.2fx [%.2f, %.2f]\n",
      o.url.c_str(), o.compare_url.c_str(), o.rounds, median(a_tok), median(a_itl), median(b_tok),
      median(b_itl), median(ratio), *std::min_element(ratio.begin(), ratio.end()),
      *std::max_element(ratio.begin(), ratio.end()));
  const auto range = [](const std::vector<double>& v, double scale) {
    return fmt::format("{:.1f} [{:.1f}, {:.1f}]", scale * median(v),
                       scale * *std::min_element(v.begin(), v.end()),
                       scale * *std::max_element(v.begin(), v.end()));
  };
  std::printf("medians [ranges]: A %s tok/s, prefix cache hit %s%%; B %s tok/s, hit %s%%\n",
              range(a_tok, 1).c_str(), range(a_hit, 100).c_str(), range(b_tok, 1).c_str(),
              range(b_hit, 100).c_str());
  if (!o.json_path.empty()) {
    json j = {{"url_a", o.url},
              {"url_b", o.compare_url},
              {"rounds", o.rounds},
              {"a_output_tok_s", a_tok},
              {"b_output_tok_s", b_tok},
              {"b_over_a", ratio},
              {"a_p99_itl_ms", a_itl},
              {"b_p99_itl_ms", b_itl},
              {"a_prefix_cache_hit", a_hit},
              {"b_prefix_cache_hit", b_hit}};
    std::ofstream out(o.json_path);
    KILN_CHECK(out, "cannot write {}", o.json_path);
    out << j.dump(2) << "\n";
  }
}

void run_bench_serving(const ServingOptions& o) {
  const Workload w = prepare(o);
  if (!o.compare_url.empty()) {
    compare_rounds(o, w);
    return;
  }
  KILN_CHECK(o.rounds == 1, "--rounds needs --compare-url (the second server to alternate with)");
  ServingResult result = run_against(o, o.url, w, "bench serving");
  std::string rate = std::isinf(o.request_rate) ? "inf" : fmt::format("{:.2f}", o.request_rate);
  std::string conc = o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : "not set";
  std::fputs(format_serving_result(result, "kiln-" + o.api, rate, conc).c_str(), stdout);
  if (!o.json_path.empty()) {
    json j = serving_result_json(result);
    j["backend"] = "kiln-" + o.api;
    j["request_rate"] = rate;
    j["max_concurrency"] = o.max_concurrency;
    j["num_prompts"] = o.num_prompts;
    j["input_len"] = o.input_len;
    j["output_len"] = o.output_len;
    j["dataset"] = o.dataset;
    if (o.dataset == "shared-prefix") {
      j["shared_prefix_groups"] = o.shared_prefix_groups;
      j["shared_prefix_len"] = o.shared_prefix_len;
    }
    std::ofstream out(o.json_path);
    KILN_CHECK(out, "cannot write {}", o.json_path);
    out << j.dump(2) << "\n";
  }
}

}  // namespace

void add_bench_serving_command(CLI::App& bench) {
  auto o = std::make_shared<ServingOptions>();
  auto* s = bench.add_subcommand(
      "serving",
      "Online serving benchmark against a running server (SGLang bench_serving metrics)");
  s->add_option("--url", o->url, "Server URL")->capture_default_str();
  s->add_option("--api", o->api, "native (/generate) or openai (/v1/completions)")
      ->check(CLI::IsMember({"native", "openai"}))
      ->capture_default_str();
  s->add_option("--api-key", o->api_key, "Bearer token for the server");
  s->add_option("--num-prompts", o->num_prompts, "Requests to send")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--input-len", o->input_len, "Prompt tokens per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--output-len", o->output_len, "Generated tokens per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s->add_option("--request-rate", o->request_rate,
                "Requests per second, Poisson arrivals (default: all at once)");
  s->add_option("--max-concurrency", o->max_concurrency, "Cap on requests in flight (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s->add_option("--prompt-kind", o->prompt_kind,
                "ids: random token ids; text: the same ids detokenized by the server")
      ->check(CLI::IsMember({"ids", "text"}))
      ->capture_default_str();
  s->add_option("--dataset", o->dataset,
                "random: random prompts; shared-prefix: each prompt after one of "
                "--shared-prefix-groups shared prefixes, the groups taking turns")
      ->check(CLI::IsMember({"random", "shared-prefix"}))
      ->capture_default_str();
  s->add_option("--shared-prefix-groups", o->shared_prefix_groups,
                "Shared prefixes (system prompts) of --dataset shared-prefix")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  s->add_option("--shared-prefix-len", o->shared_prefix_len,
                "Tokens of each shared prefix (--input-len tokens of its own follow it)")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  s->add_option("--vocab-size", o->vocab_size, "Vocabulary size (default: from /get_model_info)");
  s->add_option("--seed", o->seed, "Seed for prompts and arrivals")->capture_default_str();
  s->add_flag("--disable-ignore-eos", o->disable_ignore_eos,
              "Let requests stop at end-of-sequence instead of generating --output-len tokens");
  s->add_option("--json", o->json_path, "Also write the results as JSON here");
  s->add_option("--compare-url", o->compare_url,
                "A second server (B) to measure against --url (A) with the same requests, in "
                "--rounds alternating rounds");
  s->add_option("--rounds", o->rounds, "Rounds of the A/B comparison (order alternating)")
      ->check(CLI::Range(1, 1000));
  s->callback([o] { run_bench_serving(*o); });
}

}  // namespace kiln::cli
