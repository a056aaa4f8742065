#include "kiln/graph/parser.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

#include "kiln/base/error.h"
#include "kiln/graph/printer.h"

namespace kiln::graph {
namespace {

enum class Tok { End, Ident, ValueRef, String, Number, Punct };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier, value name (without %), unescaped string, number, punct char
  int line = 1;
  int col = 1;
};

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  Token next() {
    skip_space_and_comments();
    Token t;
    t.line = line_;
    t.col = col_;
    if (pos_ >= text_.size()) return t;
    const char ch = text_[pos_];
    if (ch == '%') {
      advance();
      t.kind = Tok::ValueRef;
      t.text = take_while(is_name_char);
      if (t.text.empty()) error(t, "expected a value name after '%'");
    } else if (ch == '"') {
      t.kind = Tok::String;
      t.text = read_string(t);
    } else if (std::isdigit(static_cast<unsigned char>(ch)) || ch == '-' || ch == '+') {
      t.kind = Tok::Number;
      t.text = read_number(t);
    } else if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      t.kind = Tok::Ident;
      t.text = take_while(is_name_char);
    } else if (std::string_view("(){}[],=:").find(ch) != std::string_view::npos) {
      t.kind = Tok::Punct;
      t.text = std::string(1, ch);
      advance();
    } else {
      error(t, fmt::format("unexpected character '{}'", ch));
    }
    return t;
  }

  [[noreturn]] static void error(const Token& at, const std::string& message) {
    fail("line {}, column {}: {}", at.line, at.col, message);
  }

 private:
  static bool is_name_char(char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.';
  }

  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  template <typename Pred>
  std::string take_while(Pred pred) {
    std::string out;
    while (pos_ < text_.size() && pred(text_[pos_])) {
      out += text_[pos_];
      advance();
    }
    return out;
  }

  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      if (std::isspace(static_cast<unsigned char>(text_[pos_]))) {
        advance();
      } else if (text_.substr(pos_, 2) == "//") {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else {
        return;
      }
    }
  }

  std::string read_string(const Token& at) {
    advance();  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') error(at, "unterminated string");
      const char ch = text_[pos_];
      advance();
      if (ch == '"') return out;
      if (ch != '\\') {
        out += ch;
        continue;
      }
      if (pos_ >= text_.size()) error(at, "unterminated string");
      const char esc = text_[pos_];
      advance();
      switch (esc) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'x': {
          if (pos_ + 2 > text_.size()) error(at, "bad \\x escape");
          int v = 0;
          auto [p, ec] = std::from_chars(text_.data() + pos_, text_.data() + pos_ + 2, v, 16);
          if (ec != std::errc() || p != text_.data() + pos_ + 2) error(at, "bad \\x escape");
          advance();
          advance();
          out += static_cast<char>(v);
          break;
        }
        default:
          error(at, fmt::format("unknown escape '\\{}'", esc));
      }
    }
  }

  // Sign, digits, fraction, exponent; or a signed inf/nan.
  std::string read_number(const Token& at) {
    std::string out;
    if (text_[pos_] == '-' || text_[pos_] == '+') {
      out += text_[pos_];
      advance();
    }
    if (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) {
      out += take_while(is_name_char);
      if (out.back() != 'f' && out.back() != 'n') error(at, fmt::format("bad number '{}'", out));
      return out;
    }
    auto digits = [&] {
      out += take_while([](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
    };
    digits();
    if (pos_ < text_.size() && text_[pos_] == '.') {
      out += '.';
      advance();
      digits();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      out += text_[pos_];
      advance();
      if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) {
        out += text_[pos_];
        advance();
      }
      digits();
    }
    return out;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : lex_(text) { tok_ = lex_.next(); }

  Graph parse_graph() {
    expect_ident("graph");
    Graph g(expect(Tok::Ident, "a graph name").text);
    if (is_punct("(")) {
      take();
      while (!is_punct(")")) {
        if (!g.dims().empty()) expect_punct(",");
        std::string dim = expect(Tok::Ident, "a dimension name").text;
        expect_punct("=");
        g.dims().emplace_back(std::move(dim), parse_int());
      }
      take();
    }
    expect_punct("{");
    while (true) {
      if (tok_.kind == Tok::Ident && tok_.text == "return") {
        take();
        parse_return(g);
        break;
      }
      parse_node(g);
    }
    expect_punct("}");
    if (tok_.kind != Tok::End) error("unexpected text after the graph");
    try {
      verify(g);
    } catch (const Error& e) {
      fail("parsed graph is not valid: {}", e.what());
    }
    return g;
  }

 private:
  [[noreturn]] void error(const std::string& message) const { Lexer::error(tok_, message); }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::End:
        return "end of text";
      case Tok::ValueRef:
        return "%" + t.text;
      case Tok::String:
        return quote_string(t.text);
      default:
        return "'" + t.text + "'";
    }
  }

  Token take() {
    Token t = tok_;
    tok_ = lex_.next();
    return t;
  }
  bool is_punct(const char* p) const { return tok_.kind == Tok::Punct && tok_.text == p; }
  Token expect(Tok kind, const char* what) {
    if (tok_.kind != kind) error(fmt::format("expected {}, got {}", what, describe(tok_)));
    return take();
  }
  void expect_punct(const char* p) {
    if (!is_punct(p)) error(fmt::format("expected '{}', got {}", p, describe(tok_)));
    take();
  }
  void expect_ident(const char* word) {
    if (tok_.kind != Tok::Ident || tok_.text != word)
      error(fmt::format("expected '{}', got {}", word, describe(tok_)));
    take();
  }

  static bool is_float_text(const std::string& s) {
    return s.find_first_of(".eEna") != std::string::npos;
  }

  int64_t parse_int() {
    const Token t = expect(Tok::Number, "an integer");
    if (is_float_text(t.text)) Lexer::error(t, fmt::format("expected an integer, got {}", t.text));
    return to_int(t);
  }
  static int64_t to_int(const Token& t) {
    int64_t v = 0;
    const char* begin = t.text.data() + (t.text[0] == '+' ? 1 : 0);
    const char* end = t.text.data() + t.text.size();
    auto [p, ec] = std::from_chars(begin, end, v);
    if (ec != std::errc() || p != end) Lexer::error(t, fmt::format("bad integer '{}'", t.text));
    return v;
  }
  static double to_float(const Token& t) {
    std::string s = t.text;
    const bool neg = !s.empty() && s[0] == '-';
    const std::string body = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? s.substr(1) : s;
    if (body == "inf")
      return neg ? -std::numeric_limits<double>::infinity()
                 : std::numeric_limits<double>::infinity();
    if (body == "nan") return std::numeric_limits<double>::quiet_NaN();
    double v = 0;
    const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
    auto [p, ec] = std::from_chars(begin, s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size())
      Lexer::error(t, fmt::format("bad number '{}'", t.text));
    return v;
  }

  AttrValue parse_attr_value() {
    if (tok_.kind == Tok::String) return take().text;
    if (tok_.kind == Tok::Ident && (tok_.text == "inf" || tok_.text == "nan"))
      return to_float(take());
    if (tok_.kind == Tok::Number) {
      const Token t = take();
      if (is_float_text(t.text)) return to_float(t);
      return to_int(t);
    }
    if (is_punct("[")) {
      take();
      if (is_punct("]")) {
        take();
        return std::vector<int64_t>{};
      }
      if (tok_.kind == Tok::String) {
        std::vector<std::string> out;
        while (true) {
          out.push_back(expect(Tok::String, "a string").text);
          if (is_punct("]")) break;
          expect_punct(",");
        }
        take();
        return out;
      }
      std::vector<int64_t> out;
      while (true) {
        out.push_back(parse_int());
        if (is_punct("]")) break;
        expect_punct(",");
      }
      take();
      return out;
    }
    error(fmt::format("expected an attribute value, got {}", describe(tok_)));
  }

  void parse_attrs(Attrs& attrs) {
    if (!is_punct("{")) return;
    take();
    while (true) {
      const Token key = expect(Tok::Ident, "an attribute name");
      if (attrs.has(key.text))
        Lexer::error(key, fmt::format("attribute '{}' given twice", key.text));
      expect_punct("=");
      attrs.set(key.text, parse_attr_value());
      if (is_punct("}")) break;
      expect_punct(",");
    }
    take();
  }

  ValueType parse_type() {
    const Token name = expect(Tok::Ident, "a type such as f32[2,640]");
    const auto dtype = dtype_from_name(name.text);
    if (!dtype) Lexer::error(name, fmt::format("unknown dtype '{}'", name.text));
    ValueType t{*dtype, Shape{}};
    expect_punct("[");
    while (!is_punct("]")) {
      if (t.shape.rank() > 0) expect_punct(",");
      const Token at = tok_;
      const int64_t d = parse_int();
      if (d < 0) Lexer::error(at, "negative dimension");
      if (t.shape.rank() == Shape::kMaxRank)
        Lexer::error(at, fmt::format("rank over {}", Shape::kMaxRank));
      t.shape.push_back(d);
    }
    take();
    return t;
  }

  Value lookup(const Token& t) const {
    auto it = values_.find(t.text);
    if (it == values_.end())
      Lexer::error(t, fmt::format("value %{} is not defined before this use", t.text));
    return it->second;
  }

  void parse_node(Graph& g) {
    std::vector<Token> results;
    while (true) {
      results.push_back(expect(Tok::ValueRef, "a result such as %x or 'return'"));
      if (!is_punct(",")) break;
      take();
    }
    expect_punct("=");
    const Token op_tok = expect(Tok::Ident, "an op name");
    const auto op = op_from_name(op_tok.text);
    if (!op) Lexer::error(op_tok, fmt::format("unknown op '{}'", op_tok.text));
    Node node;
    node.op = *op;
    if (node.is_source()) {
      node.attrs.set("name", expect(Tok::String, "the source's quoted name").text);
    } else {
      expect_punct("(");
      while (!is_punct(")")) {
        if (!node.inputs.empty()) expect_punct(",");
        node.inputs.push_back(lookup(expect(Tok::ValueRef, "an input value")));
      }
      take();
    }
    parse_attrs(node.attrs);
    expect_punct(":");
    while (true) {
      node.outputs.push_back(parse_type());
      if (!is_punct(",")) break;
      take();
    }
    if (node.outputs.size() != results.size()) {
      Lexer::error(op_tok,
                   fmt::format("{} results but {} types", results.size(), node.outputs.size()));
    }
    if (!node.is_source()) {
      std::vector<ValueType> in_types;
      for (const Value& v : node.inputs) in_types.push_back(g.type(v));
      std::vector<ValueType> inferred;
      try {
        inferred = infer_output_types(node.op, in_types, node.attrs);
      } catch (const Error& e) {
        Lexer::error(op_tok, e.what());
      }
      if (inferred != node.outputs) {
        std::string want;
        for (const auto& t : inferred) want += (want.empty() ? "" : ", ") + type_to_string(t);
        Lexer::error(op_tok, fmt::format("declared type does not match the inferred {}", want));
      }
    } else if (node.outputs.size() != 1) {
      Lexer::error(op_tok, "a source has one result");
    }
    const int self = g.num_nodes();
    bool any_name = false;
    for (size_t k = 0; k < results.size(); ++k) {
      const std::string& name = results[k].text;
      if (values_.count(name))
        Lexer::error(results[k], fmt::format("value %{} is defined twice", name));
      values_[name] = Value{self, static_cast<int32_t>(k)};
      // All-digit names are numbers the printer assigns; they are not kept as names.
      const bool numbered = name.find_first_not_of("0123456789") == std::string::npos;
      node.names.push_back(numbered ? std::string() : name);
      any_name |= !numbered;
    }
    if (!any_name) node.names.clear();
    g.add_node(std::move(node));
  }

  void parse_return(Graph& g) {
    if (tok_.kind != Tok::ValueRef) return;
    while (true) {
      g.outputs().push_back(lookup(expect(Tok::ValueRef, "an output value")));
      if (!is_punct(",")) break;
      take();
    }
  }

  Lexer lex_;
  Token tok_;
  std::map<std::string, Value> values_;
};

}  // namespace

Graph parse(std::string_view text) { return Parser(text).parse_graph(); }

}  // namespace kiln::graph
