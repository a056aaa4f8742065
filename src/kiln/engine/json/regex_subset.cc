#include "kiln/engine/json/regex_subset.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace kiln::engine {

namespace {

constexpr uint32_t kUnbounded = UINT32_MAX;
constexpr uint32_t kMaxRepeat = 1000;     // {n,m} bounds
constexpr size_t kMaxNfaStates = 200000;  // after {n,m} copies
constexpr uint32_t kNoCodePoint = UINT32_MAX;

struct Regex {
  enum Kind : uint8_t { kChars, kConcat, kAlt, kRepeat };
  Kind kind = kConcat;
  CodePointSet chars;        // kChars
  std::vector<Regex> parts;  // kConcat, kAlt; kRepeat: its one operand
  uint32_t min = 0, max = 0;
};

Regex chars_of(CodePointSet s) {
  Regex r;
  r.kind = Regex::kChars;
  r.chars = normalized(std::move(s));
  return r;
}

const CodePointSet kAscii = {{0, 0x7F}};
const CodePointSet kBmp = {{0, 0xFFFF}};
const CodePointSet kDigits = {{'0', '9'}};
const CodePointSet kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodePointSet kSpace = {{'\t', '\r'}, {' ', ' '}};

CodePointSet ascii_complement(const CodePointSet& s) { return intersection(complement(s), kAscii); }

std::vector<uint32_t> decode_utf8(std::string_view s) {
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
    if (cp > 0xFFFF) throw RegexError("has a character beyond U+FFFF (not supported)");
    out.push_back(cp);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<uint32_t> cps) : s_(std::move(cps)) {}

  // Top level: alternatives, each with its own anchors; an unanchored side may be preceded or
  // followed by any characters.
  Regex parse() {
    Regex alt;
    alt.kind = Regex::kAlt;
    for (;;) {
      const bool anchored_start = eat('^');
      bool anchored_end = false;
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
  [[noreturn]] void fail(const std::string& what) const {
    throw RegexError(fmt::format("{} (at character {})", what, i_));
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

  static Regex anything() {
    Regex r;
    r.kind = Regex::kRepeat;
    r.min = 0;
    r.max = kUnbounded;
    r.parts.push_back(chars_of(writable_code_points()));
    return r;
  }

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
        if (eat('?')) {
          if (!eat(':')) {
            fail("uses '(?' (lookaround, named groups and inline flags are not supported)");
          }
        }
        Regex inner = alternatives();
        if (!eat(')')) fail("has a '(' that is never closed");
        return inner;
      }
      case '[':
        return chars_of(char_class());
      case '.':
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
    return intersection(complement(set), any_shorthand ? kAscii : kBmp);
  }

  std::vector<uint32_t> s_;
  size_t i_ = 0;
};

// Thompson's construction: each state has epsilon moves and at most one character move.
class Nfa {
 public:
  struct State {
    std::vector<uint32_t> eps;
    CodePointSet chars;
    uint32_t to = UINT32_MAX;
  };

  uint32_t add() {
    if (states.size() >= kMaxNfaStates) {
      throw RegexError("is too large (its repetitions expand past the supported size)");
    }
    states.emplace_back();
    return static_cast<uint32_t>(states.size() - 1);
  }

  // Adds `x` after state `from`; returns the state where it ends.
  uint32_t append(const Regex& x, uint32_t from) {
    switch (x.kind) {
      case Regex::kChars: {
        const uint32_t s = add(), e = add();
        states[from].eps.push_back(s);
        states[s].chars = intersection(x.chars, writable_code_points());
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
};

// Subset construction over code point ranges.
StringAutomaton determinize(const Nfa& nfa, uint32_t start, uint32_t final_state) {
  auto closure = [&](std::vector<uint32_t> set) {
    std::vector<uint8_t> seen(nfa.states.size(), 0);
    for (uint32_t s : set) seen[s] = 1;
    for (size_t k = 0; k < set.size(); ++k) {
      for (uint32_t t : nfa.states[set[k]].eps) {
        if (!seen[t]) seen[t] = 1, set.push_back(t);
      }
    }
    std::sort(set.begin(), set.end());
    return set;
  };
  StringAutomaton out;
  std::map<std::vector<uint32_t>, uint32_t> index;
  std::vector<std::vector<uint32_t>> order;
  auto state_of = [&](std::vector<uint32_t> set) {
    set = closure(std::move(set));
    const auto it = index.find(set);
    if (it != index.end()) return it->second;
    const bool accepting = std::binary_search(set.begin(), set.end(), final_state);
    const uint32_t id = out.add_state(accepting);
    index.emplace(set, id);
    order.push_back(std::move(set));
    return id;
  };
  state_of({start});
  for (size_t k = 0; k < order.size(); ++k) {
    const std::vector<uint32_t> members = order[k];  // (order grows below)
    std::vector<uint32_t> cuts;
    for (uint32_t s : members) {
      for (const CodePointRange& r : nfa.states[s].chars) {
        cuts.push_back(r.lo);
        cuts.push_back(r.hi + 1);
      }
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (size_t c = 0; c + 1 < cuts.size(); ++c) {
      const uint32_t lo = cuts[c];
      std::vector<uint32_t> targets;
      for (uint32_t s : members) {
        const CodePointSet& ch = nfa.states[s].chars;
        const auto it = std::partition_point(ch.begin(), ch.end(),
                                             [lo](const CodePointRange& r) { return r.hi < lo; });
        if (it != ch.end() && it->lo <= lo) targets.push_back(nfa.states[s].to);
      }
      if (targets.empty()) continue;
      const uint32_t to = state_of(std::move(targets));
      out.add_edge(static_cast<uint32_t>(k), lo, cuts[c + 1] - 1, to);
    }
  }
  return out;
}

}  // namespace

StringAutomaton compile_pattern(std::string_view pattern) {
  Regex regex = Parser(decode_utf8(pattern)).parse();
  Nfa nfa;
  const uint32_t start = nfa.add();
  const uint32_t final_state = nfa.append(regex, start);
  StringAutomaton dfa;
  try {
    dfa = determinize(nfa, start, final_state);
  } catch (const std::length_error&) {
    throw RegexError(
        fmt::format("needs more than {} automaton states", StringAutomaton::kMaxStates));
  }
  if (!dfa.trim()) throw RegexError("matches no string a JSON value can hold");
  return dfa;
}

}  // namespace kiln::engine
