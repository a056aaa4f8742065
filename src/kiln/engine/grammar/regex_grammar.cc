#include "kiln/engine/grammar/regex_grammar.h"

#include <fmt/format.h>

#include <map>

#include "kiln/engine/json/regex_subset.h"

namespace kiln::engine {

GrammarAst regex_to_grammar(std::string_view pattern, ConstraintBudget& budget) {
  StringAutomaton dfa;
  try {
    dfa = compile_pattern(pattern, RegexSyntax{&all_characters(), true}, budget);
  } catch (const RegexError& e) {
    throw GrammarError(fmt::format("regex {}", e.what()));
  }
  GrammarAst ast;
  auto state_name = [](uint32_t s) { return fmt::format("s{}", s); };
  for (uint32_t s = 0; s < dfa.size(); ++s) {
    // The edges to each next state, as one class.
    std::map<uint32_t, CodePointSet> by_target;
    for (const StringAutomaton::Edge& e : dfa.edges(s)) by_target[e.to].push_back({e.lo, e.hi});
    GrammarExpr body;
    body.kind = GrammarExpr::kAlt;
    for (auto& [to, set] : by_target) {
      budget.charge(set.size() + 2);
      GrammarExpr chars;
      chars.kind = GrammarExpr::kChars;
      chars.chars = normalized(std::move(set));
      GrammarExpr next;
      next.kind = GrammarExpr::kRef;
      next.name = state_name(to);
      next.where = "regex";
      GrammarExpr alt;
      alt.kind = GrammarExpr::kSeq;
      alt.parts.push_back(std::move(chars));
      alt.parts.push_back(std::move(next));
      body.parts.push_back(std::move(alt));
    }
    if (dfa.accepting(s)) body.parts.emplace_back();  // the empty sequence
    ast.rules.push_back({state_name(s), std::move(body)});
  }
  ast.root = state_name(StringAutomaton::start());
  return ast;
}

}  // namespace kiln::engine
