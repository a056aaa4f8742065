// `kiln grammar-check`: runs strings through a grammar's automaton, with no model. For checking
// kiln's grammar engine against a parser it did not write (tests/e2e/test_grammar_oracle.py
// compares every short string with Lark's verdict). Each stdin line is one string as a JSON
// string literal (so it may hold line breaks); each output line is `accept` (a whole sentence),
// `prefix` (not yet, but some continuation is) or `reject`. A grammar that does not compile
// prints its error and exits 1.
//
// With --model, instead: the cost of this grammar's token masks on that model's vocabulary
// (bench/grammar_decode.sh reports it). A random walk of --mask-steps tokens through the grammar
// (each step a uniformly random allowed token; the sentence restarts once complete), timing the
// vocabulary walk at every step as a cache miss pays it, and counting how many steps the mask
// cache would have served. One JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "kiln/base/error.h"
#include "kiln/engine/grammar/grammar_ast.h"
#include "kiln/engine/grammar/grammar_cache.h"
#include "kiln/engine/grammar/grammar_matcher.h"
#include "kiln/engine/json/constraint_budget.h"
#include "kiln/engine/json/json_mask_cache.h"
#include "kiln/engine/tokenizer_text.h"
#include "kiln/model/model_files.h"
#include "kiln/model/tokenizer.h"
#include "order_stats.h"

namespace kiln::cli {
namespace {

struct GrammarCheckArgs {
  std::string grammar_file;
  std::string dialect = "gbnf";
  std::string regex;
  std::string model;
  int mask_steps = 200;
  uint64_t seed = 1;
};

int time_masks(const GrammarCheckArgs& a, const std::shared_ptr<const engine::Grammar>& grammar) {
  auto tok = model::Tokenizer::create(model::read_tokenizer(a.model));
  engine::TokenizerText text(*tok);
  const auto build_start = std::chrono::steady_clock::now();
  std::vector<std::pair<int32_t, std::string>> tokens;
  std::vector<int32_t> end_ids;
  for (int32_t t = 0; t < text.vocab_size(); ++t) {
    if (text.is_end_of_generation(t)) {
      end_ids.push_back(t);
    } else if (std::optional<std::string> b = text.token_bytes(t)) {
      tokens.emplace_back(t, *b);
    }
  }
  const engine::TokenTrie trie(std::move(tokens));
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - build_start)
          .count();
  engine::JsonMaskCache cache(trie, text.vocab_size(), size_t{1} << 30);
  std::mt19937_64 rng(a.seed);
  engine::GrammarMatcher m(grammar);
  std::vector<double> ms;
  uint64_t hits = 0;
  for (int step = 0; step < a.mask_steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const engine::TokenMask mask = engine::compute_token_mask(trie, m, end_ids, text.vocab_size());
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    const uint64_t before = cache.stats().hits;
    cache.get(m, end_ids);
    hits += cache.stats().hits - before;
    std::vector<int32_t> allowed;
    for (int64_t id = 0; id < mask.size(); ++id) {
      if (mask.allows(id)) allowed.push_back(static_cast<int32_t>(id));
    }
    KILN_CHECK(!allowed.empty(), "the grammar allows no token at step {}", step);
    const int32_t pick = allowed[rng() % allowed.size()];
    const bool ends = std::find(end_ids.begin(), end_ids.end(), pick) != end_ids.end();
    if (ends) {
      m = engine::GrammarMatcher(grammar);
    } else {
      KILN_CHECK(m.feed(*text.token_bytes(pick)), "token {} broke the grammar", pick);
    }
  }
  std::sort(ms.begin(), ms.end());
  const nlohmann::json line = {
      {"vocab", text.vocab_size()},
      {"steps", ms.size()},
      {"trie_build_ms", build_ms},
      {"mask_median_ms", quantile_of_sorted(ms, 0.5)},
      {"mask_p90_ms", quantile_of_sorted(ms, 0.9)},
      {"mask_max_ms", ms.back()},
      {"cache_hit_fraction", static_cast<double>(hits) / static_cast<double>(ms.size())}};
  std::printf("%s\n", line.dump().c_str());
  return 0;
}

int run_grammar_check(const GrammarCheckArgs& a) {
  std::string text = a.regex;
  engine::GrammarDialect dialect = engine::GrammarDialect::kRegex;
  if (a.regex.empty()) {
    std::ifstream in(a.grammar_file, std::ios::binary);
    KILN_CHECK(in.good(), "cannot open grammar file '{}'", a.grammar_file);
    text.assign(std::istreambuf_iterator<char>(in), {});
    KILN_CHECK(a.dialect == "gbnf" || a.dialect == "ebnf", "--dialect must be gbnf or ebnf");
    dialect = a.dialect == "gbnf" ? engine::GrammarDialect::kGbnf : engine::GrammarDialect::kEbnf;
  }
  std::shared_ptr<const engine::Grammar> grammar;
  try {
    grammar = engine::compile_grammar_text(dialect, text);
  } catch (const engine::GrammarError& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  } catch (const engine::ConstraintBudgetExceeded& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  if (!a.model.empty()) return time_masks(a, grammar);
  std::string line;
  while (std::getline(std::cin, line)) {
    const std::string s = nlohmann::json::parse(line).get<std::string>();
    engine::GrammarMatcher m(grammar);
    const char* verdict = !m.feed(s) ? "reject" : m.complete() ? "accept" : "prefix";
    std::printf("%s\n", verdict);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_grammar_check_command(CLI::App& app) {
  auto args = std::make_shared<GrammarCheckArgs>();
  CLI::App* cmd = app.add_subcommand(
      "grammar-check",
      "Run strings (JSON string literals, one per stdin line) through a grammar: accept, prefix "
      "or reject per line");
  auto* file = cmd->add_option("--grammar", args->grammar_file, "GBNF / EBNF grammar file");
  cmd->add_option("--dialect", args->dialect, "gbnf (llama.cpp) or ebnf (SGLang)");
  cmd->add_option("--regex", args->regex, "A regex (SGLang's: the whole string must match)")
      ->excludes(file);
  cmd->add_option("--model", args->model,
                  "Time the grammar's token masks on this model's vocabulary instead");
  cmd->add_option("--mask-steps", args->mask_steps, "Steps of the random walk (with --model)");
  cmd->add_option("--seed", args->seed, "Seed of the random walk (with --model)");
  cmd->callback([args] { std::exit(run_grammar_check(*args)); });
}

}  // namespace kiln::cli
