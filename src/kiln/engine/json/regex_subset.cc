#include "kiln/engine/json/regex_subset.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/base/input_limits.h"

namespace kiln::engine {

namespace {

constexpr uint32_t kUnbounded = UINT32_MAX;
constexpr uint32_t kMaxRepeat = 1000;     // {n,m} bounds
constexpr size_t kMaxNfaStates = 200000;  // after {n,m} copies
constexpr uint32_t kNoCodePoint = UINT32_MAX;

// The parsed pattern. Every walk of it (building, the NFA, the destructor) recurses once per
// level; groups are the only construct that nests (a quantifier on a quantifier is refused),
// and the parser refuses them past kMaxInputNesting, so the depth stays a few hundred.
struct Regex {
  enum Kind : uint8_t { kChars, kConcat, kAlt, kRepeat };
  Kind kind = kConcat;
  CodePointSet chars;        // kChars: already limited to the writable code points
  std::vector<Regex> parts;  // kConcat, kAlt; kRepeat: its one operand
  uint32_t min = 0, max = 0;
};

Regex chars_of(const CodePointSet& s, const CodePointSet& alphabet) {
  Regex r;
  r.kind = Regex::kChars;
  r.chars = intersection(normalized(s), alphabet);
  return r;
}

const CodePointSet kAscii = {{0, 0x7F}};
const CodePointSet kBmp = {{0, 0xFFFF}};
const CodePointSet kDigits = {{'0', '9'}};
const CodePointSet kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodePointSet kSpace = {{'\t', '\r'}, {' ', ' '}};

CodePointSet ascii_complement(const CodePointSet& s) { return intersection(complement(s), kAscii); }

std::vector<uint32_t> decode_utf8(std::string_view s, bool beyond_bmp) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const int extra = b < 0x80 ? 0 : b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : -1;
    if (extra < 0 || i + static_cast<size_t>(extra) >= s.size()) {
      throw RegexError("is not valid UTF-8");
    }
    uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto c = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((c & 0xC0) != 0x80) throw RegexError("is not valid UTF-8");
      cp = (cp << 6) | (c & 0x3F);
    }
    // ECMA-262 without the u flag matches UTF-16 units, Python code points: beyond the BMP
    // the two read `.`, classes and quantifiers differently.
    if (cp > 0xFFFF && !beyond_bmp)
      throw RegexError("has a character beyond U+FFFF (not supported)");
    out.push_back(cp);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

class Parser {
 public:
  Parser(std::vector<uint32_t> cps, const RegexSyntax& syntax, ConstraintBudget& budget)
      : s_(std::move(cps)), syntax_(syntax) {
    // Each character is read once and makes at most one node; a class's ranges are sorted.
    budget.charge(4 * (uint64_t{s_.size()} + 1));
  }

  // Top level: alternatives, each with its own anchors; an unanchored side may be preceded or
  // followed by any characters.
  Regex parse() {
    Regex alt;
    alt.kind = Regex::kAlt;
    for (;;) {
      // A whole match implies the anchors (written ones are allowed, as Python's fullmatch
      // allows them).
      const bool anchored_start = eat('^') || syntax_.whole;
      bool anchored_end = syntax_.whole;
      Regex body = concat(true, &anchored_end);
      Regex branch;
      if (!anchored_start) branch.parts.push_back(anything());
      branch.parts.push_back(std::move(body));
      if (!anchored_end) branch.parts.push_back(anything());
      alt.parts.push_back(std::move(branch));
      if (at_end()) break;
      if (peek() == ')') fail("has a ')' that closes no group");
      ++i_;  // '|'
    }
    return alt;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(i_, what); }
  [[noreturn]] static void fail_at(size_t at, const std::string& what) {
    throw RegexError(fmt::format("{} (at character {})", what, at));
  }
  bool at_end() const { return i_ >= s_.size(); }
  uint32_t peek(size_t ahead = 0) const {
    return i_ + ahead < s_.size() ? s_[i_ + ahead] : kNoCodePoint;
  }
  bool eat(uint32_t c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }

  Regex anything() const {
    Regex r;
    r.kind = Regex::kRepeat;
    r.min = 0;
    r.max = kUnbounded;
    r.parts.push_back(chars_of(alphabet()));
    return r;
  }
  const CodePointSet& alphabet() const { return *syntax_.alphabet; }
  Regex chars_of(const CodePointSet& s) const { return kiln::engine::chars_of(s, alphabet()); }
  // What `.` and negated classes range over: the BMP where ECMA-262 and Python must agree (a
  // JSON pattern), every character for a whole-output regex (Python's reading).
  const CodePointSet& universe() const { return syntax_.whole ? alphabet() : kBmp; }

  Regex alternatives() {
    Regex alt;
    alt.kind = Regex::kAlt;
    alt.parts.push_back(concat(false, nullptr));
    while (eat('|')) alt.parts.push_back(concat(false, nullptr));
    return alt;
  }

  // Atoms with their quantifiers, up to '|', ')' or the end. At the top level a '$' may end
  // the alternative.
  Regex concat(bool top, bool* anchored_end) {
    Regex seq;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++i_;
        if (!top || (!at_end() && peek() != '|')) {
          fail("uses '$' inside the pattern (only at the end of an alternative is supported)");
        }
        *anchored_end = true;
        break;
      }
      if (peek() == '^') {
        fail("uses '^' inside the pattern (only at the start of an alternative is supported)");
      }
      Regex item = atom();
      if (quantifier(item)) {
        if (peek() == '?') ++i_;  // lazy: the same strings
        uint32_t min = 0, max = 0;
        if (peek() == '*' || peek() == '+' || peek() == '?' || braces(&min, &max, false)) {
          fail("repeats a quantifier");
        }
      }
      seq.parts.push_back(std::move(item));
    }
    return seq;
  }

  // {n}, {n,}, {n,m} at the current position (not consumed unless `consume`).
  bool braces(uint32_t* min, uint32_t* max, bool consume) {
    size_t j = i_ + 1;
    auto number = [&](uint32_t* out) {
      const size_t from = j;
      uint64_t v = 0;
      while (j < s_.size() && s_[j] >= '0' && s_[j] <= '9') {
        v = std::min<uint64_t>(v * 10 + (s_[j] - '0'), uint64_t{kMaxRepeat} + 1);
        ++j;
      }
      *out = static_cast<uint32_t>(v);
      return j > from;
    };
    if (peek() != '{') return false;
    if (peek(1) == ',') fail("uses '{,n}', which ECMA-262 reads as text and Python as a count");
    uint32_t lo = 0, hi = 0;
    if (!number(&lo)) return false;
    if (j < s_.size() && s_[j] == ',') {
      ++j;
      if (!number(&hi)) hi = kUnbounded;
    } else {
      hi = lo;
    }
    if (j >= s_.size() || s_[j] != '}') return false;
    if (consume) {
      if (lo > kMaxRepeat || (hi != kUnbounded && hi > kMaxRepeat)) {
        fail(fmt::format("repeats more than {} times", kMaxRepeat));
      }
      if (hi < lo) fail("has a {n,m} with m < n");
      i_ = j + 1;
    }
    *min = lo, *max = hi;
    return true;
  }

  // Applies a quantifier at the current position to `x`; false when there is none.
  bool quantifier(Regex& x) {
    uint32_t min = 0, max = 0;
    const uint32_t c = peek();
    if (c == '*') {
      max = kUnbounded, ++i_;
    } else if (c == '+') {
      min = 1, max = kUnbounded, ++i_;
    } else if (c == '?') {
      max = 1, ++i_;
    } else if (!braces(&min, &max, true)) {
      return false;
    }
    Regex r;
    r.kind = Regex::kRepeat;
    r.min = min;
    r.max = max;
    r.parts.push_back(std::move(x));
    x = std::move(r);
    return true;
  }

  Regex atom() {
    const uint32_t c = peek();
    uint32_t unused_min = 0, unused_max = 0;
    if (c == '*' || c == '+' || c == '?' || braces(&unused_min, &unused_max, false)) {
      fail("has a quantifier with nothing to repeat");
    }
    ++i_;
    switch (c) {
      case '(': {
        // The parser recurses once per group (and so do the walks of the tree it builds).
        if (depth_ == kMaxInputNesting) {
          fail_at(i_ - 1, fmt::format("nests groups deeper than {} levels", kMaxInputNesting));
        }
        if (eat('?')) {
          if (!eat(':')) {
            fail("uses '(?' (lookaround, named groups and inline flags are not supported)");
          }
        }
        ++depth_;
        Regex inner = alternatives();
        --depth_;
        if (!eat(')')) fail("has a '(' that is never closed");
        return inner;
      }
      case '[':
        return chars_of(char_class());
      case '.':
        if (syntax_.whole) return chars_of(intersection(complement({{'\n', '\n'}}), universe()));
        return chars_of(
            intersection(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}), kBmp));
      case '\\': {
        bool shorthand = false;
        return chars_of(escape(false, &shorthand));
      }
      default:
        return chars_of({{c, c}});
    }
  }

  uint32_t hex_digits(int count) {
    uint32_t v = 0;
    for (int k = 0; k < count; ++k) {
      const uint32_t h = peek();
      int d = -1;
      if (h >= '0' && h <= '9') d = static_cast<int>(h - '0');
      if (h >= 'a' && h <= 'f') d = static_cast<int>(h - 'a' + 10);
      if (h >= 'A' && h <= 'F') d = static_cast<int>(h - 'A' + 10);
      if (d < 0) fail(fmt::format("has an escape that needs {} hex digits", count));
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    return v;
  }

  // After a backslash: the characters it stands for. `shorthand`: a class escape (\d ...).
  CodePointSet escape(bool in_class, bool* shorthand) {
    if (at_end()) fail("ends with a backslash");
    const uint32_t c = peek();
    ++i_;
    *shorthand = true;
    switch (c) {
      case 'd':
        return kDigits;
      case 'D':
        return ascii_complement(kDigits);
      case 'w':
        return kWord;
      case 'W':
        return ascii_complement(kWord);
      case 's':
        return kSpace;
      case 'S':
        return ascii_complement(kSpace);
      default:
        break;
    }
    *shorthand = false;
    auto one = [](uint32_t cp) { return CodePointSet{{cp, cp}}; };
    switch (c) {
      case 't':
        return one('\t');
      case 'n':
        return one('\n');
      case 'r':
        return one('\r');
      case 'f':
        return one('\f');
      case 'v':
        return one('\v');
      case 'b':
        if (in_class) return one('\b');
        fail("uses \\b (word boundaries are not supported)");
      case 'x':
        return one(hex_digits(2));
      case 'u': {
        const uint32_t cp = hex_digits(4);
        if (cp >= 0xD800 && cp <= 0xDFFF) fail("escapes a surrogate (not supported)");
        return one(cp);
      }
      case '0':
        if (peek() >= '0' && peek() <= '9') fail("uses an octal escape (not supported)");
        return one(0);
      default:
        break;
    }
    if (c >= '1' && c <= '9') fail("uses a backreference (not supported)");
    if (c < 0x80 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
      fail(fmt::format("uses the escape \\{} (not supported)", static_cast<char>(c)));
    }
    return one(c);  // escaped punctuation (or any other character) stands for itself
  }

  // After '[': the class's characters, up to and including ']'.
  CodePointSet char_class() {
    const bool negate = eat('^');
    if (peek() == ']') fail("has '[]' or '[^]', which ECMA-262 and Python read differently");
    CodePointSet set;
    bool any_shorthand = false;
    // One class member: a character (kNoCodePoint when it was a shorthand, added to `set`).
    auto member = [&]() -> uint32_t {
      if (at_end()) fail("has a '[' that is never closed");
      const uint32_t c = peek();
      ++i_;
      if (c != '\\') return c;
      bool shorthand = false;
      CodePointSet e = escape(true, &shorthand);
      if (shorthand) {
        any_shorthand = true;
        set.insert(set.end(), e.begin(), e.end());
        return kNoCodePoint;
      }
      return e[0].lo;
    };
    while (!eat(']')) {
      const uint32_t lo = member();
      if (peek() == '-' && peek(1) != ']' && peek(1) != kNoCodePoint) {
        if (lo == kNoCodePoint) fail("has a range that starts at a class escape");
        ++i_;
        const uint32_t hi = member();
        if (hi == kNoCodePoint) fail("has a range that ends at a class escape");
        if (hi < lo) fail("has a range whose end is before its start");
        set.push_back({lo, hi});
      } else if (lo != kNoCodePoint) {
        set.push_back({lo, lo});
      }
    }
    set = normalized(std::move(set));
    if (!negate) return set;
    // A negated shorthand differs between ECMA (ASCII classes) and Python (Unicode ones):
    // only ASCII characters are read the same way by both.
    return intersection(complement(set), any_shorthand ? kAscii : universe());
  }

  std::vector<uint32_t> s_;
  RegexSyntax syntax_;
  size_t i_ = 0;
  int depth_ = 0;  // groups open at i_
};

// Thompson's construction: each state has epsilon moves and at most one character move.
class Nfa {
 public:
  struct State {
    std::vector<uint32_t> eps;
    const CodePointSet* chars = nullptr;  // the Regex node's (which outlives the NFA)
    uint32_t to = UINT32_MAX;
  };

  explicit Nfa(ConstraintBudget& budget) : budget_(budget) {}

  uint32_t add() {
    if (states.size() >= kMaxNfaStates) {
      throw RegexError("is too large (its repetitions expand past the supported size)");
    }
    states.emplace_back();
    return static_cast<uint32_t>(states.size() - 1);
  }

  // Adds `x` after state `from`; returns the state where it ends. {n,m} walks its operand up
  // to m times, so nested counts multiply the work: each call is charged.
  uint32_t append(const Regex& x, uint32_t from) {
    budget_.charge(1);
    switch (x.kind) {
      case Regex::kChars: {
        const uint32_t s = add(), e = add();
        states[from].eps.push_back(s);
        states[s].chars = &x.chars;
        states[s].to = e;
        return e;
      }
      case Regex::kConcat: {
        uint32_t at = from;
        for (const Regex& p : x.parts) at = append(p, at);
        return at;
      }
      case Regex::kAlt: {
        const uint32_t e = add();
        for (const Regex& p : x.parts) {
          const uint32_t b = add();
          states[from].eps.push_back(b);
          const uint32_t end = append(p, b);
          states[end].eps.push_back(e);
        }
        return e;
      }
      case Regex::kRepeat: {
        uint32_t at = from;
        for (uint32_t k = 0; k < x.min; ++k) at = append(x.parts[0], at);
        if (x.max == kUnbounded) {
          const uint32_t loop = add(), body = add(), out = add();
          states[at].eps.push_back(loop);
          states[loop].eps.push_back(body);
          states[loop].eps.push_back(out);
          const uint32_t end = append(x.parts[0], body);
          states[end].eps.push_back(loop);
          return out;
        }
        const uint32_t out = add();
        for (uint32_t k = x.min; k < x.max; ++k) {
          states[at].eps.push_back(out);
          at = append(x.parts[0], at);
        }
        states[at].eps.push_back(out);
        return out;
      }
    }
    return from;
  }

  std::vector<State> states;

 private:
  ConstraintBudget& budget_;
};

struct StateSetHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the members
    for (uint32_t x : v) h = (h ^ x) * 0x100000001b3ULL;
    return static_cast<size_t>(h);
  }
};

// Subset construction over code point ranges. Each step is linear in what it reads and
// writes (the members of a set, their ranges, the target sets), all charged to the budget.
StringAutomaton determinize(const Nfa& nfa, uint32_t start, uint32_t final_state,
                            ConstraintBudget& budget) {
  // seen[s] == stamp: s is in the closure being built. A new stamp per closure instead of
  // clearing an NFA-sized vector per DFA edge (which made large NFAs quadratic).
  std::vector<uint32_t> seen(nfa.states.size(), 0);
  uint32_t stamp = 0;
  auto closure = [&](std::vector<uint32_t> set) {
    ++stamp;
    for (uint32_t s : set) seen[s] = stamp;
    for (size_t k = 0; k < set.size(); ++k) {
      const std::vector<uint32_t>& eps = nfa.states[set[k]].eps;
      budget.charge(1 + eps.size());
      for (uint32_t t : eps) {
        if (seen[t] != stamp) seen[t] = stamp, set.push_back(t);
      }
    }
    std::sort(set.begin(), set.end());
    return set;
  };
  StringAutomaton out;
  // Sets live once, as the index's keys (nodes do not move); `order` points at them.
  std::unordered_map<std::vector<uint32_t>, uint32_t, StateSetHash> index;
  std::vector<const std::vector<uint32_t>*> order;
  auto state_of = [&](std::vector<uint32_t> set) {
    set = closure(std::move(set));
    budget.charge(4 + set.size());  // hashing and comparing it, a node for a new one
    const auto it = index.find(set);
    if (it != index.end()) return it->second;
    const bool accepting = std::binary_search(set.begin(), set.end(), final_state);
    const uint32_t id = out.add_state(accepting);
    order.push_back(&index.emplace(std::move(set), id).first->first);
    return id;
  };
  state_of({start});
  std::vector<const CodePointSet*> sets;
  std::vector<uint32_t> cuts;
  std::vector<std::vector<uint32_t>> targets;  // per range between two cuts
  for (size_t k = 0; k < order.size(); ++k) {
    const std::vector<uint32_t>& members = *order[k];
    // Cuts come from each distinct set once: the copies of one {n,m} operand share theirs.
    sets.clear();
    budget.charge(members.size());
    for (uint32_t s : members) {
      if (nfa.states[s].chars != nullptr) sets.push_back(nfa.states[s].chars);
    }
    std::sort(sets.begin(), sets.end());
    sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
    cuts.clear();
    for (const CodePointSet* set : sets) {
      budget.charge(1 + set->size());
      for (const CodePointRange& r : *set) {
        cuts.push_back(r.lo);
        cuts.push_back(r.hi + 1);
      }
    }
    // Sorting the cuts and finding each range among them: one comparison per level.
    budget.charge(cuts.size() * std::bit_width(cuts.size()));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    if (cuts.size() < 2) continue;
    targets.assign(cuts.size() - 1, {});
    // Each range covers the consecutive pieces from its first cut up to the cut after its end
    // (r.hi + 1 is a cut): its target goes to each.
    for (uint32_t s : members) {
      if (nfa.states[s].chars == nullptr) continue;
      for (const CodePointRange& r : *nfa.states[s].chars) {
        budget.charge(std::bit_width(cuts.size()));
        for (auto c = static_cast<size_t>(std::lower_bound(cuts.begin(), cuts.end(), r.lo) -
                                          cuts.begin());
             cuts[c] <= r.hi; ++c) {
          budget.charge(1);
          targets[c].push_back(nfa.states[s].to);
        }
      }
    }
    // Pieces with the same targets as the previous piece lead to the same state (a class of
    // many separate characters): compared, they skip the closure and the lookup.
    size_t previous = SIZE_MAX;
    uint32_t previous_to = 0;
    for (size_t c = 0; c + 1 < cuts.size(); ++c) {
      if (targets[c].empty()) continue;
      if (previous != SIZE_MAX) {
        budget.charge(1 + std::min(targets[c].size(), targets[previous].size()));
      }
      const uint32_t to = previous != SIZE_MAX && targets[c] == targets[previous]
                              ? previous_to
                              : state_of(targets[c]);
      out.add_edge(static_cast<uint32_t>(k), cuts[c], cuts[c + 1] - 1, to);
      previous = c;
      previous_to = to;
    }
  }
  return out;
}

}  // namespace

StringAutomaton compile_pattern(std::string_view pattern, ConstraintBudget& budget) {
  return compile_pattern(pattern, RegexSyntax{}, budget);
}

const CodePointSet& all_characters() {
  static const CodePointSet kAll = {{0, 0xD7FF}, {0xE000, 0x10FFFF}};
  return kAll;
}

StringAutomaton compile_pattern(std::string_view pattern, const RegexSyntax& syntax,
                                ConstraintBudget& budget) {
  Regex regex = Parser(decode_utf8(pattern, syntax.whole), syntax, budget).parse();
  Nfa nfa(budget);
  const uint32_t start = nfa.add();
  const uint32_t final_state = nfa.append(regex, start);
  StringAutomaton dfa;
  try {
    dfa = determinize(nfa, start, final_state, budget);
  } catch (const std::length_error&) {
    throw RegexError(
        fmt::format("needs more than {} automaton states", StringAutomaton::kMaxStates));
  }
  if (!dfa.trim(budget)) {
    throw RegexError(syntax.whole ? "matches no string"
                                  : "matches no string a JSON value can hold");
  }
  return dfa;
}

StringAutomaton compile_pattern(std::string_view pattern) {
  ConstraintBudget budget;
  return compile_pattern(pattern, budget);
}

}  // namespace kiln::engine
