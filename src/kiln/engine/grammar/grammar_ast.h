// A grammar as written (GBNF / SGLang's EBNF, gbnf_parser.h; a regex, regex_grammar.h), before
// it is lowered to the byte-level rules the matcher runs (grammar_compiler.h).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/engine/json/string_automaton.h"

namespace kiln::engine {

// A grammar kiln refuses: the message names the rule or the position (what the server returns
// in its 400).
class GrammarError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct GrammarExpr {
  enum Kind : uint8_t {
    kSeq,     // parts in order (empty: the empty string)
    kAlt,     // one of parts
    kChars,   // one character of `chars`
    kRef,     // the rule `name`
    kRepeat,  // parts[0], between min and max times (max kUnbounded: no limit)
  };
  static constexpr uint32_t kUnbounded = UINT32_MAX;

  Kind kind = kSeq;
  CodePointSet chars;
  std::string name;
  // kRef: where the name was written ("line 3, column 7"), for "undefined rule" errors.
  std::string where;
  std::vector<GrammarExpr> parts;
  uint32_t min = 0, max = 0;
};

struct GrammarRuleDef {
  std::string name;
  GrammarExpr body;
};

struct GrammarAst {
  std::vector<GrammarRuleDef> rules;  // in the order written; rule names are unique
  std::string root = "root";
};

}  // namespace kiln::engine
