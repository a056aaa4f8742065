#include "kiln/engine/grammar/grammar_compiler.h"

#include <fmt/format.h>

#include <map>
#include <unordered_map>
#include <utility>

#include "kiln/engine/grammar/utf8_ranges.h"

namespace kiln::engine {

namespace {

struct Elem {
  uint8_t kind;
  uint32_t value;
};
using Seq = std::vector<Elem>;

class Lowering {
 public:
  Lowering(const GrammarAst& ast, ConstraintBudget& budget) : ast_(ast), budget_(budget) {}

  std::shared_ptr<Grammar> run() {
    for (const GrammarRuleDef& r : ast_.rules) {
      ids_.emplace(r.name, static_cast<uint32_t>(rules_.size()));
      rules_.emplace_back();
      names_.push_back(r.name);
    }
    const auto root = ids_.find(ast_.root);
    if (root == ids_.end()) {
      throw GrammarError(fmt::format("grammar has no rule '{}' (the start rule)", ast_.root));
    }
    for (size_t i = 0; i < ast_.rules.size(); ++i) {
      owner_ = ast_.rules[i].name;
      rules_[i] = alternatives_of(ast_.rules[i].body);
    }
    auto g = std::make_shared<Grammar>();
    // Element 0: the start rule.
    g->kind = {Grammar::kRule, Grammar::kEnd};
    g->value = {root->second, 0};
    g->byte_sets = std::move(byte_sets_);
    g->rule_names = std::move(names_);
    g->alternatives.resize(rules_.size());
    for (size_t r = 0; r < rules_.size(); ++r) {
      for (const Seq& alt : rules_[r]) {
        g->alternatives[r].push_back(static_cast<uint32_t>(g->kind.size()));
        for (const Elem& e : alt) {
          g->kind.push_back(e.kind);
          g->value.push_back(e.value);
        }
        g->kind.push_back(Grammar::kEnd);
        g->value.push_back(0);
      }
    }
    check_grammar(*g, ast_.rules.size(), budget_);
    return g;
  }

 private:
  std::vector<Seq> alternatives_of(const GrammarExpr& e) {
    std::vector<Seq> alts;
    if (e.kind == GrammarExpr::kAlt) {
      for (const GrammarExpr& p : e.parts) alts.push_back(sequence_of(p));
    } else {
      alts.push_back(sequence_of(e));
    }
    return alts;
  }

  Seq sequence_of(const GrammarExpr& e) {
    Seq out;
    append(e, out);
    return out;
  }

  void push(Seq& out, Elem e) {
    budget_.charge(1);
    out.push_back(e);
  }

  uint32_t new_rule(const std::string& what, std::vector<Seq> alts) {
    // A rule costs far more than an element (its vectors, its name): priced as 64 of them.
    uint64_t total = 64;
    for (const Seq& s : alts) total += s.size() + 1;
    budget_.charge(total);
    rules_.push_back(std::move(alts));
    names_.push_back(fmt::format("{}/{}", owner_, what));
    return static_cast<uint32_t>(rules_.size() - 1);
  }

  uint32_t byte_set(const ByteSet& s) {
    const auto [it, added] = byte_set_ids_.emplace(s, static_cast<uint32_t>(byte_sets_.size()));
    if (added) byte_sets_.push_back(s);
    return it->second;
  }

  static ByteSet range_set(uint8_t lo, uint8_t hi) {
    ByteSet s{};
    for (unsigned b = lo; b <= hi; ++b) s[b >> 6] |= uint64_t{1} << (b & 63);
    return s;
  }

  void append_chars(const CodePointSet& set, Seq& out) {
    if (set.empty()) {  // an empty class: an empty byte set (check_grammar names the rule)
      push(out, {Grammar::kBytes, byte_set(ByteSet{})});
      return;
    }
    if (set.back().hi < 0x80) {  // ASCII: one byte
      ByteSet s{};
      for (const CodePointRange& r : set) {
        const ByteSet part = range_set(static_cast<uint8_t>(r.lo), static_cast<uint8_t>(r.hi));
        for (int w = 0; w < 4; ++w) s[w] |= part[w];
      }
      push(out, {Grammar::kBytes, byte_set(s)});
      return;
    }
    budget_.charge(set.size() * 8);
    std::vector<ByteRangeSeq> seqs = utf8_sequences(set);
    if (seqs.size() == 1) {  // one character, or one run of them sharing an encoding shape
      for (const ByteRange& r : seqs[0])
        push(out, {Grammar::kBytes, byte_set(range_set(r.lo, r.hi))});
      return;
    }
    // One rule per distinct class (a class used many times is lowered once).
    std::vector<uint32_t> key;
    for (const CodePointRange& r : set) key.insert(key.end(), {r.lo, r.hi});
    const auto known = class_rules_.find(key);
    if (known != class_rules_.end()) {
      push(out, {Grammar::kRule, known->second});
      return;
    }
    // Sequences with the same ASCII byte set fold into one alternative.
    ByteSet ascii{};
    std::vector<Seq> alts;
    for (const ByteRangeSeq& brs : seqs) {
      if (brs.size() == 1) {
        const ByteSet part = range_set(brs[0].lo, brs[0].hi);
        for (int w = 0; w < 4; ++w) ascii[w] |= part[w];
        continue;
      }
      Seq alt;
      for (const ByteRange& r : brs) push(alt, {Grammar::kBytes, byte_set(range_set(r.lo, r.hi))});
      alts.push_back(std::move(alt));
    }
    if (ascii != ByteSet{}) alts.insert(alts.begin(), Seq{{Grammar::kBytes, byte_set(ascii)}});
    const uint32_t id = new_rule("class", std::move(alts));
    class_rules_.emplace(std::move(key), id);
    push(out, {Grammar::kRule, id});
  }

  // `e` as one element: itself when it lowers to one, else a rule of its own.
  Elem as_element(const GrammarExpr& e, const char* what) {
    if (e.kind == GrammarExpr::kAlt) return {Grammar::kRule, new_rule(what, alternatives_of(e))};
    Seq s = sequence_of(e);
    if (s.size() == 1) return s[0];
    return {Grammar::kRule, new_rule(what, {std::move(s)})};
  }

  void append(const GrammarExpr& e, Seq& out) {
    switch (e.kind) {
      case GrammarExpr::kSeq:
        for (const GrammarExpr& p : e.parts) append(p, out);
        return;
      case GrammarExpr::kAlt:
        push(out, {Grammar::kRule, new_rule("group", alternatives_of(e))});
        return;
      case GrammarExpr::kChars:
        append_chars(e.chars, out);
        return;
      case GrammarExpr::kRef: {
        const auto it = ids_.find(e.name);
        if (it == ids_.end()) {
          throw GrammarError(fmt::format("grammar rule '{}' refers to the undefined rule '{}' ({})",
                                         owner_, e.name, e.where));
        }
        push(out, {Grammar::kRule, it->second});
        return;
      }
      case GrammarExpr::kRepeat:
        append_repeat(e, out);
        return;
    }
  }

  void append_repeat(const GrammarExpr& e, Seq& out) {
    const Elem x = as_element(e.parts[0], "item");
    for (uint32_t k = 0; k < e.min; ++k) push(out, x);
    if (e.max == GrammarExpr::kUnbounded) {
      // R ::= x R | (empty)
      const uint32_t r = new_rule("repeat", {});
      budget_.charge(4);
      rules_[r] = {Seq{x, {Grammar::kRule, r}}, Seq{}};
      push(out, {Grammar::kRule, r});
      return;
    }
    if (e.max == e.min) return;
    // O_1 ::= x | (empty); O_k ::= x O_(k-1) | (empty)
    uint32_t inner = new_rule("optional", {Seq{x}, Seq{}});
    for (uint32_t k = e.min + 2; k <= e.max; ++k) {
      inner = new_rule("optional", {Seq{x, {Grammar::kRule, inner}}, Seq{}});
    }
    push(out, {Grammar::kRule, inner});
  }

  const GrammarAst& ast_;
  ConstraintBudget& budget_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::vector<Seq>> rules_;
  std::vector<std::string> names_;
  std::string owner_;
  std::vector<ByteSet> byte_sets_;
  std::map<ByteSet, uint32_t> byte_set_ids_;
  std::map<std::vector<uint32_t>, uint32_t> class_rules_;
};

}  // namespace

std::shared_ptr<Grammar> compile_grammar(const GrammarAst& ast, ConstraintBudget& budget) {
  return Lowering(ast, budget).run();
}

}  // namespace kiln::engine
