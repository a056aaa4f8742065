// Lowers a GrammarAst (gbnf_parser.h, regex_grammar.h) to the byte-level rules the matcher
// runs (grammar.h). Groups, alternatives inside a sequence, repetitions and classes beyond
// ASCII become generated rules, as llama.cpp does: x* is R ::= x R | (empty), right-recursive so
// the matcher's stacks do not grow with the count; x{m,n} is m copies of x and n - m nested
// optional ones.
//
// Refused (GrammarError, naming the rule): a reference to an undefined rule (with where it
// was written), no `root` rule, left recursion (a rule that can reach itself before consuming
// a byte, x* of an x that can be empty included), and a rule that can never finish (every
// alternative needs itself again, or an empty class): the matcher's invariant is that every
// prefix it accepts can be completed. Compiling charges `budget` per element made, so a
// grammar whose repetitions expand past the budget stops with ConstraintBudgetExceeded.
#pragma once
#include <memory>

#include "kiln/engine/grammar/grammar.h"
#include "kiln/engine/grammar/grammar_ast.h"
#include "kiln/engine/json/constraint_budget.h"

namespace kiln::engine {

std::shared_ptr<Grammar> compile_grammar(const GrammarAst& ast, ConstraintBudget& budget);

// The checks above on a lowered grammar (grammar_checks.cc); `user_rules`: how many of its
// rules were written by the user (the rest are generated and named after their owner).
void check_grammar(const Grammar& g, size_t user_rules, ConstraintBudget& budget);

}  // namespace kiln::engine
