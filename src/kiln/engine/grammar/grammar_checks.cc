// The compile-time checks of compile_grammar (grammar_compiler.h): every rule reachable from the
// start can finish, and none is left-recursive. Together they give the matcher its invariant:
// expanding a stack terminates, and every prefix it accepts can be completed.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "kiln/engine/grammar/grammar_compiler.h"

namespace kiln::engine {

namespace {

// The rule a message names: a generated rule is named "<owner>/<what>".
std::string owner_of(const std::string& name) { return name.substr(0, name.find('/')); }

bool is_empty_set(const ByteSet& s) { return s == ByteSet{}; }

// Fixpoint: a rule has the property when some alternative has it in every element.
std::vector<uint8_t> fixpoint(const Grammar& g, bool bytes_count, ConstraintBudget& budget) {
  std::vector<uint8_t> has(g.alternatives.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    budget.charge(g.kind.size() + 1);
    for (size_t r = 0; r < g.alternatives.size(); ++r) {
      if (has[r]) continue;
      for (uint32_t pos : g.alternatives[r]) {
        bool all = true;
        for (; !g.is_end(pos); ++pos) {
          const bool ok = g.kind[pos] == Grammar::kRule
                              ? has[g.value[pos]] != 0
                              : bytes_count && !is_empty_set(g.byte_sets[g.value[pos]]);
          all = all && ok;
        }
        if (all) {
          has[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  return has;
}

}  // namespace

void check_grammar(const Grammar& g, size_t user_rules, ConstraintBudget& budget) {
  const size_t n = g.alternatives.size();
  // Reachable from the start.
  std::vector<uint8_t> reach(n, 0);
  std::vector<uint32_t> todo{g.value[0]};
  reach[g.value[0]] = 1;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    for (uint32_t pos : g.alternatives[r]) {
      for (; !g.is_end(pos); ++pos) {
        budget.charge(1);
        if (g.kind[pos] == Grammar::kRule && !reach[g.value[pos]]) {
          reach[g.value[pos]] = 1;
          todo.push_back(g.value[pos]);
        }
      }
    }
  }
  const std::vector<uint8_t> finishes = fixpoint(g, true, budget);
  // The rule named is one that fails of itself: its alternatives need no other failing rule
  // (a rule that only refers to it fails too, but is not where the fix goes).
  size_t culprit = n;
  for (size_t r = 0; r < n; ++r) {
    if (!reach[r] || finishes[r]) continue;
    bool of_itself = true;
    for (uint32_t pos : g.alternatives[r]) {
      for (; !g.is_end(pos); ++pos) {
        const uint32_t t = g.value[pos];
        if (g.kind[pos] == Grammar::kRule && t != r && !finishes[t]) of_itself = false;
      }
    }
    if (culprit == n || (of_itself && r < user_rules)) culprit = r;
    if (of_itself && r < user_rules) break;
  }
  if (culprit != n) {
    throw GrammarError(fmt::format(
        "grammar rule '{}' can never finish (every alternative needs the rule again, or an "
        "empty character class)",
        owner_of(g.rule_names[culprit])));
  }
  // Left recursion: an edge r -> s when s can come first in r (after rules that can be empty).
  const std::vector<uint8_t> empty = fixpoint(g, false, budget);
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r) {
    for (uint32_t pos : g.alternatives[r]) {
      for (; !g.is_end(pos) && g.kind[pos] == Grammar::kRule; ++pos) {
        budget.charge(1);
        first[r].push_back(g.value[pos]);
        if (!empty[g.value[pos]]) break;
      }
    }
  }
  // Depth-first search for a cycle (iterative: a grammar may chain thousands of rules).
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t s = 0; s < n; ++s) {
    if (color[s] != 0) continue;
    std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(s), 0}};
    color[s] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == first[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t t = first[r][next++];
      budget.charge(1);
      if (color[t] == 2) continue;
      if (color[t] == 0) {
        color[t] = 1;
        path.push_back({t, 0});
        continue;
      }
      // A cycle through t: name the user rules on it.
      std::vector<std::string> chain;
      bool from_t = false, generated_only = true;
      for (const auto& [q, unused] : path) {
        from_t = from_t || q == t;
        if (!from_t) continue;
        if (q < user_rules) generated_only = false;
        const std::string o = owner_of(g.rule_names[q]);
        if (chain.empty() || chain.back() != o) chain.push_back(o);
      }
      if (generated_only) {
        throw GrammarError(fmt::format(
            "grammar rule '{}' repeats (with * + or {{m,}}) something that can match the empty "
            "string",
            chain.front()));
      }
      std::string via;
      for (const std::string& c : chain) via += c + " -> ";
      via += chain.front();
      throw GrammarError(fmt::format(
          "grammar rule '{}' is left-recursive ({}): kiln refuses left recursion; write it with "
          "repetition, e.g. expr ::= term (\"+\" term)*",
          chain.front(), via));
    }
  }
}

}  // namespace kiln::engine
