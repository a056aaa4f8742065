#include "kiln/engine/grammar/grammar_cache.h"

#include "kiln/base/lru_cache.h"
#include "kiln/engine/grammar/gbnf_parser.h"
#include "kiln/engine/grammar/grammar_compiler.h"
#include "kiln/engine/grammar/grammar_matcher.h"
#include "kiln/engine/grammar/regex_grammar.h"

namespace kiln::engine {

std::shared_ptr<const Grammar> compile_grammar_text(GrammarDialect dialect, std::string_view text) {
  ConstraintBudget budget;
  budget.charge(text.size());
  const GrammarAst ast =
      dialect == GrammarDialect::kRegex ? regex_to_grammar(text, budget) : parse_gbnf(text);
  std::shared_ptr<Grammar> grammar = compile_grammar(ast, budget);
  grammar->source_bytes = text.size();
  // The first byte's expansion within the matcher's bounds (a grammar that passes them before
  // any output would accept nothing).
  if (grammar_start(*grammar).data.empty()) {
    throw GrammarError(
        "grammar is too ambiguous or nests too deep before its first character (more than 256 "
        "parses at once, or more than 512 nested rules)");
  }
  return grammar;
}

std::shared_ptr<const Grammar> compile_grammar_cached(GrammarDialect dialect,
                                                      const std::string& text) {
  static LruCache<Grammar> cache(64, size_t{256} << 20);
  std::string key(1, static_cast<char>('0' + static_cast<int>(dialect)));
  key += text;
  if (std::shared_ptr<const Grammar> hit = cache.find(key)) return hit;
  std::shared_ptr<const Grammar> grammar = compile_grammar_text(dialect, text);
  return cache.insert(key, grammar, grammar->approx_bytes());
}

}  // namespace kiln::engine
