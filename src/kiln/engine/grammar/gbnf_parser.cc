#include "kiln/engine/grammar/gbnf_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "kiln/base/input_limits.h"

namespace kiln::engine {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  GrammarAst parse() {
    GrammarAst ast;
    std::unordered_set<std::string> names;
    skip_space();
    if (at_end()) fail("is empty (a grammar needs at least the rule 'root')");
    while (!at_end()) {
      const size_t start = i_;
      std::string name = read_name();
      if (name.empty()) fail("expects a rule name");
      skip_space();
      if (!eat_text("::=")) fail(fmt::format("expects '::=' after the rule name '{}'", name));
      if (!names.insert(name).second) fail_at(start, fmt::format("defines rule '{}' twice", name));
      skip_space();
      ast.rules.push_back({std::move(name), alternatives()});
      skip_space();
    }
    return ast;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(i_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    throw GrammarError(fmt::format("grammar {} ({})", what, where(at)));
  }
  std::string where(size_t at) const {
    size_t line = 1, column = 1;
    for (size_t k = 0; k < at && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return fmt::format("line {}, column {}", line, column);
  }
  bool at_end() const { return i_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }
  bool eat_text(std::string_view t) {
    if (s_.substr(i_, t.size()) != t) return false;
    i_ += t.size();
    return true;
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    const size_t start = i_;
    while (!at_end() && is_name_char(peek())) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }

  // At a name: whether it starts the next rule (`name ::=`).
  bool at_rule_start() const {
    size_t k = i_;
    while (k < s_.size() && is_name_char(s_[k])) ++k;
    if (k == i_) return false;
    while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t' || s_[k] == '\n' || s_[k] == '\r')) ++k;
    return s_.substr(k, 3) == "::=";
  }

  GrammarExpr alternatives() {
    GrammarExpr alt;
    alt.kind = GrammarExpr::kAlt;
    alt.parts.push_back(sequence());
    while (peek() == '|') {
      ++i_;
      skip_space();
      alt.parts.push_back(sequence());
    }
    if (alt.parts.size() == 1) return std::move(alt.parts[0]);
    return alt;
  }

  GrammarExpr sequence() {
    GrammarExpr seq;
    seq.kind = GrammarExpr::kSeq;
    for (;;) {
      skip_space();
      const char c = peek();
      if (at_end() || c == '|' || c == ')') break;
      if (is_name_char(c) && at_rule_start()) break;
      GrammarExpr item = primary();
      skip_space();
      while (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')) {
        item = postfix(std::move(item));
        skip_space();
      }
      seq.parts.push_back(std::move(item));
    }
    return seq;
  }

  GrammarExpr postfix(GrammarExpr item) {
    GrammarExpr rep;
    rep.kind = GrammarExpr::kRepeat;
    const char c = peek();
    ++i_;
    if (c == '*') {
      rep.min = 0, rep.max = GrammarExpr::kUnbounded;
    } else if (c == '+') {
      rep.min = 1, rep.max = GrammarExpr::kUnbounded;
    } else if (c == '?') {
      rep.min = 0, rep.max = 1;
    } else {  // {m}, {m,}, {m,n}, {,n}
      const size_t open = i_ - 1;
      skip_space();
      rep.min = peek() == ',' ? 0 : bound();
      skip_space();
      if (peek() == ',') {
        ++i_;
        skip_space();
        rep.max = peek() == '}' ? GrammarExpr::kUnbounded : bound();
        skip_space();
      } else {
        rep.max = rep.min;
      }
      if (peek() != '}') fail("has a repetition '{' that is not closed by '}'");
      ++i_;
      if (rep.max < rep.min) fail_at(open, "has a repetition {m,n} with n < m");
    }
    rep.parts.push_back(std::move(item));
    return rep;
  }

  uint32_t bound() {
    const size_t start = i_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > kMaxGrammarRepeat) {
        fail_at(start, fmt::format("has a repetition bound above {}", kMaxGrammarRepeat));
      }
      ++i_;
    }
    if (i_ == start) fail("expects a number in the repetition '{...}'");
    return static_cast<uint32_t>(v);
  }

  GrammarExpr primary() {
    const char c = peek();
    if (c == '"' || c == '\'') return literal(c);
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return chars({{0, 0xD7FF}, {0xE000, 0x10FFFF}});
    }
    if (c == '(') {
      const size_t open = i_;
      ++i_;
      if (peek() == '=' || peek() == '!') {
        fail("uses a lookahead assertion '(=' (an XGrammar extension kiln does not implement)");
      }
      if (++depth_ > kMaxInputNesting) {
        fail(fmt::format("nests groups deeper than {}", kMaxInputNesting));
      }
      skip_space();
      GrammarExpr inner = alternatives();
      --depth_;
      if (peek() != ')') fail_at(open, "has a '(' that is never closed");
      ++i_;
      return inner;
    }
    if (is_name_char(c)) {
      GrammarExpr ref;
      ref.kind = GrammarExpr::kRef;
      ref.where = where(i_);
      ref.name = read_name();
      return ref;
    }
    if (at_end()) fail("ends where an item was expected");
    fail(fmt::format("has an unexpected character '{}'", c));
  }

  static GrammarExpr chars(CodePointSet set) {
    GrammarExpr e;
    e.kind = GrammarExpr::kChars;
    e.chars = std::move(set);
    return e;
  }

  // One UTF-8 character of the source (or one escape), as a code point.
  uint32_t character() {
    const auto b = static_cast<uint8_t>(peek());
    if (b == '\\') return escape();
    const int extra = b < 0x80 ? 0 : b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : -1;
    if (extra < 0 || i_ + static_cast<size_t>(extra) >= s_.size() + (extra == 0 ? 1 : 0)) {
      fail("is not valid UTF-8");
    }
    uint32_t cp = extra == 0 ? b : b & (0x3Fu >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto cb = static_cast<uint8_t>(peek(static_cast<size_t>(k)));
      if ((cb & 0xC0) != 0x80) fail("is not valid UTF-8");
      cp = (cp << 6) | (cb & 0x3Fu);
    }
    i_ += static_cast<size_t>(extra) + 1;
    return cp;
  }

  uint32_t escape() {
    const size_t at = i_;
    ++i_;  // the backslash
    const char c = peek();
    ++i_;
    switch (c) {
      case 'n':
        return '\n';
      case 't':
        return '\t';
      case 'r':
        return '\r';
      case 'f':
        return '\f';
      case 'v':
        return '\v';
      case 'b':
        return '\b';
      case '0':
        return 0;
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '/':
      case '^':
        return static_cast<uint8_t>(c);
      case 'x':
        return hex(at, 2);
      case 'u':
        return hex(at, 4);
      case 'U':
        return hex(at, 8);
      default:
        break;
    }
    if (c == '\0') fail_at(at, "ends inside an escape");
    fail_at(at, fmt::format("has an unknown escape '\\{}'", c));
  }

  uint32_t hex(size_t at, int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const char h = peek();
      int d = -1;
      if (h >= '0' && h <= '9') d = h - '0';
      if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
      if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
      if (d < 0) fail_at(at, fmt::format("has an escape that needs {} hex digits", digits));
      v = v * 16 + static_cast<uint32_t>(d);
      ++i_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
      fail_at(at, fmt::format("escapes U+{:04X}, which is not a character", v));
    }
    return v;
  }

  GrammarExpr literal(char quote) {
    const size_t open = i_;
    ++i_;
    GrammarExpr seq;
    seq.kind = GrammarExpr::kSeq;
    while (peek() != quote) {
      if (at_end()) fail_at(open, "has a string that is never closed");
      const uint32_t cp = character();
      seq.parts.push_back(chars({{cp, cp}}));
    }
    ++i_;
    return seq;
  }

  GrammarExpr char_class() {
    const size_t open = i_;
    ++i_;
    const bool negate = peek() == '^';
    if (negate) ++i_;
    CodePointSet set;
    while (peek() != ']') {
      if (at_end()) fail_at(open, "has a '[' that is never closed");
      const uint32_t lo = character();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < s_.size()) {
        ++i_;
        hi = character();
        if (hi < lo) fail(fmt::format("has a range whose end is before its start"));
      }
      set.push_back({lo, hi});
    }
    ++i_;
    set = normalized(std::move(set));
    if (negate) set = intersection(complement(set), {{0, 0xD7FF}, {0xE000, 0x10FFFF}});
    return chars(std::move(set));
  }

  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

GrammarAst parse_gbnf(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace kiln::engine
