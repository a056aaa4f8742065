// JSON schema's `pattern`: the regular-expression subset that OpenAI's structured outputs and
// llama.cpp's schema converter accept, compiled to a StringAutomaton (string_automaton.h).
//
// Supported: literals (UTF-8), `.`, classes `[...]` / `[^...]` with ranges, the escapes
// \d \w \s \D \W \S \t \n \r \f \v \xHH \uHHHH and escaped punctuation, groups `(...)` and
// `(?:...)`, alternation `|`, quantifiers `* + ? {n} {n,} {n,m}` (lazy forms too: they match
// the same strings), and `^` / `$` at the start / end of a top-level alternative. As JSON
// Schema says, a pattern need not match the whole string: an alternative without `^` may be
// preceded by anything, one without `$` followed by anything.
//
// Semantics are those both ECMA-262 (what JSON Schema names) and Python's `re` (what the
// `jsonschema` package runs) agree on: \d is [0-9], \w [A-Za-z0-9_], \s ASCII whitespace, and
// \D \W \S (and negated classes holding a shorthand) are their ASCII complements; `.` is any
// character but \n, \r, U+2028 and U+2029. Whatever the two read differently is refused:
// backreferences, lookaround, word boundaries, named groups, inline flags, `[]`, `{,n}`.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#include "kiln/engine/json/string_automaton.h"

namespace kiln::engine {

class RegexError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a pattern reads. The default is JSON Schema's `pattern` (above). SGLang's `regex`
// constraint on a whole output: the whole string must match (Python's re.fullmatch; `^` and `$`
// are implied, and allowed where the default allows them), and the alphabet is every character
// (newlines, tabs and control characters included; `.` is any character but \n and negated
// classes complement over all of Unicode, as in Python).
struct RegexSyntax {
  const CodePointSet* alphabet = &writable_code_points();
  bool whole = false;
};
// Every Unicode scalar value (what RegexSyntax{&all_characters(), true} matches over).
const CodePointSet& all_characters();

// Throws RegexError naming what is not supported (and where), that groups nest deeper than
// kMaxInputNesting (input_limits.h), or that no JSON string matches; ConstraintBudgetExceeded
// when compiling it would take more steps than `budget` has left (constraint_budget.h).
StringAutomaton compile_pattern(std::string_view pattern, ConstraintBudget& budget);
StringAutomaton compile_pattern(std::string_view pattern, const RegexSyntax& syntax,
                                ConstraintBudget& budget);
// The same with a budget of its own.
StringAutomaton compile_pattern(std::string_view pattern);

}  // namespace kiln::engine
