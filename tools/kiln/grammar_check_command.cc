// `kiln grammar-check`: runs strings through a grammar's automaton, with no model. For checking
// kiln's grammar engine against a parser it did not write (tests/e2e/test_grammar_oracle.py
// compares every short string with Lark's verdict). Each stdin line is one string as a JSON
// string literal (so it may hold line breaks); each output line is `accept` (a whole sentence),
// `prefix` (not yet, but some continuation is) or `reject`. A grammar that does not compile
// prints its error and exits 1.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "kiln/base/error.h"
#include "kiln/engine/grammar/grammar_ast.h"
#include "kiln/engine/grammar/grammar_cache.h"
#include "kiln/engine/grammar/grammar_matcher.h"
#include "kiln/engine/json/constraint_budget.h"

namespace kiln::cli {
namespace {

struct GrammarCheckArgs {
  std::string grammar_file;
  std::string dialect = "gbnf";
  std::string regex;
};

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
  cmd->callback([args] { std::exit(run_grammar_check(*args)); });
}

}  // namespace kiln::cli
