#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/base/error.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/printer.h"

namespace kiln::graph {
namespace {

// Expects parse(text) to throw an Error whose message contains `needle`.
void expect_parse_error(const std::string& text, const std::string& needle) {
  try {
    parse(text);
    FAIL() << "parsed without error:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

constexpr const char* kSmall = R"(graph decode(B=2, S=3) {
  %x = input "x" : f32[2,8]
  %w = param "w" : q8_0[64,32]
  %b = param "bias" {note="has \"quotes\"\n"} : f32[8]
  %0 = add(%x, %b) : f32[2,8]
  %1 = scale(%0) {factor=0.1} : f32[2,8]
  %r = reshape(%1) {shape=[2,2,4]} : f32[2,2,4]
  %2 = cast(%r) {dtype="f16"} : f16[2,2,4]
  return %2, %1
}
)";

TEST(PrinterParser, PrintedTextRoundTripsExactly) {
  Graph g = parse(kSmall);
  EXPECT_EQ(print(g), kSmall);
  EXPECT_EQ(g.dims().size(), 2u);
  EXPECT_EQ(g.node(2).attrs.get_str("note"), "has \"quotes\"\n");
  Graph again = parse(print(g));
  std::string why;
  EXPECT_TRUE(structurally_equal(g, again, &why)) << why;
}

TEST(PrinterParser, MultiOutputAndAllAttributeKinds) {
  constexpr const char* text = R"(graph g() {
  %a = input "a" : f32[3,4]
  %b = input "b" : f32[3,4]
  %w = param "w" : f32[4]
  %s, %n = add_rms_norm(%a, %b, %w) {eps=1e-06, i=-7, l=[1,-2,3], e=[], names=["p","q"], big=1e+300, tiny=5e-324, neg=-inf} : f32[3,4], f32[3,4]
  return %n, %s
}
)";
  Graph g = parse(text);
  EXPECT_EQ(print(g), text);
  const Attrs& at = g.node(3).attrs;
  EXPECT_EQ(at.get_int("i"), -7);
  EXPECT_EQ(at.get_ints("l"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(at.get_strs("names"), (std::vector<std::string>{"p", "q"}));
  EXPECT_EQ(at.get_float("tiny"), std::numeric_limits<double>::denorm_min());
  EXPECT_TRUE(std::isinf(at.get_float("neg")));
  EXPECT_EQ(g.outputs()[0], (Value{3, 1}));
}

// attention's softcap attribute is printed only when set (uncapped models keep their text)
// and parses back to the same graph.
TEST(PrinterParser, AttentionSoftcapAttributeRoundTrips) {
  constexpr const char* text = R"(graph g() {
  %q = input "q" : f32[2,32]
  %k = input "k" : f32[2,16]
  %kv = state "kv" : f16[2,4,16,16]
  %bt = input "bt" : i32[1,4]
  %sl = input "sl" : i32[1]
  %p = input "p" : i32[2]
  %s = input "s" : i32[2]
  %t = kv_write(%kv, %k, %k, %p) {layer=0} : token[]
  %a = attention(%q, %t, %bt, %sl, %p, %s) {layer=0, n_heads=2, n_kv_heads=1, head_dim=16, window=0, scale=0.25, softcap=50.0} : f32[2,32]
  return %a
}
)";
  Graph g = parse(text);
  EXPECT_EQ(print(g), text);
  EXPECT_EQ(g.node(8).attrs.get_float("softcap"), 50.0);
  Graph again = parse(print(g));
  std::string why;
  EXPECT_TRUE(structurally_equal(g, again, &why)) << why;
}

TEST(PrinterParser, RopeWithFrequencyFactorsAndNRotRoundTrips) {
  constexpr const char* text = R"(graph g() {
  %x = input "x" : f32[2,32]
  %pos = input "positions" : i32[2]
  %ff = param "rope_freqs.weight" : f32[6]
  %r = rope(%x, %pos, %ff) {head_dim=16, freq_base=500000.0, neox=0, n_rot=12} : f32[2,32]
  %p = rope(%x, %pos) {head_dim=16, freq_base=10000.0, neox=1} : f32[2,32]
  return %r, %p
}
)";
  Graph g = parse(text);
  EXPECT_EQ(print(g), text);
  EXPECT_EQ(g.node(3).inputs.size(), 3u);
  EXPECT_EQ(g.node(3).attrs.get_int("n_rot"), 12);
  EXPECT_EQ(g.node(4).inputs.size(), 2u);
  EXPECT_FALSE(g.node(4).attrs.has("n_rot"));
}

TEST(PrinterParser, FloatsRoundTripBitExactly) {
  for (double v :
       {1.0, 0.1, 1e-6, 1.0f * 1e-6, 25.298221281347036, 1.0 / 3.0, -0.0, 123456789.0, 1e22}) {
    Graph g("f");
    Node n;
    n.op = Op::Input;
    n.attrs.set("name", "x");
    n.attrs.set("v", v);
    n.outputs = {ValueType{DType::F32, Shape{1}}};
    g.add_node(n);
    g.outputs().push_back(Value{0, 0});
    Graph back = parse(print(g));
    const double r = back.node(0).attrs.get_float("v");
    EXPECT_EQ(std::signbit(r), std::signbit(v));
    EXPECT_EQ(r, v) << print(g);
    EXPECT_TRUE(std::holds_alternative<double>(*back.node(0).attrs.find("v"))) << print(g);
  }
}

TEST(PrinterParser, NumberedValuesAreRenumberedInOrderAndNamesAreDeduplicated) {
  Graph g = parse(R"(graph g {
    %x = input "x" : f32[2]   // comment
    %17 = scale(%x) {factor=2.0} : f32[2]
    %5 = scale(%17) {factor=3.0} : f32[2]
    return %5
  })");
  EXPECT_EQ(print(g), R"(graph g() {
  %x = input "x" : f32[2]
  %0 = scale(%x) {factor=2.0} : f32[2]
  %1 = scale(%0) {factor=3.0} : f32[2]
  return %1
}
)");
  g.set_value_name(Value{1, 0}, "x");  // collides with the input's name
  const std::string text = print(g);
  EXPECT_NE(text.find("%x.1 = scale(%x)"), std::string::npos) << text;
  EXPECT_EQ(print(parse(text)), text);
}

TEST(PrinterParser, ErrorsNameLineAndColumn) {
  expect_parse_error(
      "graph g() {\n  %x = input \"x\" : f32[2]\n  %y = frobnicate(%x) : f32[2]\n  return %y\n}",
      "line 3, column 8: unknown op 'frobnicate'");
  expect_parse_error("graph g() {\n  %y = scale(%x) {factor=1.0} : f32[2]\n  return %y\n}",
                     "line 2, column 14: value %x is not defined");
  expect_parse_error("graph g() {\n  %x = input \"x\" : f33[2]\n  return %x\n}",
                     "line 2, column 20: unknown dtype 'f33'");
  expect_parse_error(
      "graph g() {\n  %x = input \"x\" : f32[2]\n  %y = scale(%x) {factor=1.0} : f32[3]\n  return "
      "%y\n}",
      "line 3, column 8: declared type does not match the inferred f32[2]");
  expect_parse_error(
      "graph g() {\n  %x = input \"x\" : f32[2]\n  %y = scale(%x) : f32[2]\n  return %y\n}",
      "line 3, column 8: scale: missing attribute 'factor'");
  expect_parse_error(
      "graph g() {\n  %x = input \"x\" : f32[2]\n  %x = input \"y\" : f32[2]\n  return %x\n}",
      "line 3, column 3: value %x is defined twice");
  expect_parse_error("graph g() {\n  %x = input \"x : f32[2]\n}",
                     "line 2, column 14: unterminated string");
  expect_parse_error("graph g() {\n  %x = input \"x\" : f32[2]\n  return %x\n",
                     "expected '}', got end of text");
  expect_parse_error("graph g() {\n  %x = input \"x\" : f32[2] $\n}",
                     "line 2, column 27: unexpected character '$'");
}

TEST(PrinterParser, ParsedGraphIsVerified) {
  // Two mutations consume the same state: the token chain would fork.
  expect_parse_error(R"(graph g() {
  %kv = state "kv" : f16[4,8]
  %k = input "k" : f32[1,8]
  %s = input "s" : i32[1]
  %t0 = kv_write(%kv, %k, %k, %s) {layer=0} : token[]
  %t1 = kv_write(%kv, %k, %k, %s) {layer=1} : token[]
  return %t0, %t1
})",
                     "token chain must be linear");
}

}  // namespace
}  // namespace kiln::graph
