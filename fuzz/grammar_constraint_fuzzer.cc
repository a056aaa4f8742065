// Grammar-constrained decoding: the input is a dialect byte ('g' GBNF, 'e' SGLang's EBNF, else a
// regex), a grammar (a request's `grammar`, `ebnf` or `regex`: untrusted), a NUL byte, then bytes
// a model might generate. The grammar is compiled (refusals are GrammarError or
// ConstraintBudgetExceeded), the bytes are fed to the matcher until it refuses one, and at every
// accepted prefix the invariant constrained decoding relies on is checked: the output is
// complete or some next byte is accepted (no dead end, where the mask would allow nothing).
// Every few bytes both mask walks (through the suffix classes and the plain one) must equal a
// token-by-token check over a small fixed vocabulary.
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "kiln/engine/grammar/grammar_ast.h"
#include "kiln/engine/grammar/grammar_cache.h"
#include "kiln/engine/grammar/grammar_matcher.h"
#include "kiln/engine/grammar/grammar_token_mask.h"
#include "kiln/engine/json/constraint_budget.h"
#include "kiln/engine/json/token_trie.h"

namespace {

const std::vector<std::string>& pieces() {
  static const std::vector<std::string> p = {
      "a",    "b",  "ab",  "ba",     "aa",   "0",    "1",        "12",           " ",
      "\n",   "(",  ")",   "()",     "[",    "]",    ",",        "\"",           "+",
      "-",    "*",  "x",   "SELECT", "\xC3", "\xA9", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F",
      "\x80", "  ", "a b", "1+",     "))"};
  return p;
}

const kiln::engine::TokenTrie& trie() {
  static const kiln::engine::TokenTrie t = kiln::engine::TokenTrie::from_pieces(pieces());
  return t;
}

kiln::engine::GrammarDialect dialect_of(uint8_t b) {
  using kiln::engine::GrammarDialect;
  if (b == 'g') return GrammarDialect::kGbnf;
  if (b == 'e') return GrammarDialect::kEbnf;
  return GrammarDialect::kRegex;
}

// Both walks against feeding each token on a copy.
void check_masks(const kiln::engine::GrammarMatcher& m) {
  using namespace kiln::engine;
  const size_t vocab = pieces().size() + 1;
  const int32_t end_ids[] = {static_cast<int32_t>(pieces().size())};
  std::vector<uint8_t> classes(vocab), plain(vocab);
  grammar_allowed_tokens(trie(), m, end_ids, classes);
  grammar_allowed_tokens_plain(trie(), m, end_ids, plain);
  for (size_t t = 0; t < pieces().size(); ++t) {
    GrammarMatcher copy = m;
    const uint8_t fed = copy.feed(pieces()[t]) ? 1 : 0;
    if (fed != classes[t] || fed != plain[t]) __builtin_trap();
  }
  const uint8_t end = m.complete() ? 1 : 0;
  if (end != classes[pieces().size()] || end != plain[pieces().size()]) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::engine;
  if (size == 0) return 0;
  const GrammarDialect dialect = dialect_of(data[0]);
  ++data;
  --size;
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t text_size = nul != nullptr ? static_cast<size_t>(nul - data) : size;
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = compile_grammar_text(
        dialect, std::string_view(reinterpret_cast<const char*>(data), text_size));
  } catch (const GrammarError&) {
    return 0;
  } catch (const ConstraintBudgetExceeded&) {
    return 0;
  }
  GrammarMatcher m(grammar);
  const size_t start = nul != nullptr ? text_size + 1 : size;
  for (size_t i = start; i <= size; ++i) {
    bool any_next = m.complete();
    for (int b = 0; b < 256 && !any_next; ++b) {
      GrammarState s = m.state();
      any_next = grammar_feed(*grammar, s, static_cast<uint8_t>(b));
    }
    if (!any_next) __builtin_trap();  // a dead end: nothing could follow this prefix
    if ((i - start) % 8 == 0) check_masks(m);
    if (i == size || !m.feed(std::string(1, static_cast<char>(data[i])))) break;
  }
  return 0;
}
