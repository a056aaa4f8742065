// SGLang's `regex` constraint as a grammar: the pattern compiles to a DFA with the JSON-schema
// pattern compiler (regex_subset.h, whole-match syntax over every character), and each DFA
// state becomes a rule (its edges as alternatives `[class] next-state`, an empty alternative
// when it accepts). The grammar is right-linear, so the matcher holds one short stack per
// state: a regex runs on the same matcher, masks and caches as a grammar.
#pragma once
#include <string_view>

#include "kiln/engine/grammar/grammar_ast.h"
#include "kiln/engine/json/constraint_budget.h"

namespace kiln::engine {

// Throws GrammarError ("regex ..." with RegexError's reason) or ConstraintBudgetExceeded.
GrammarAst regex_to_grammar(std::string_view pattern, ConstraintBudget& budget);

}  // namespace kiln::engine
