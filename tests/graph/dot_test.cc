#include "kiln/graph/dot.h"

#include <gtest/gtest.h>

#include "kiln/graph/parser.h"

namespace kiln::graph {
namespace {

TEST(Dot, NodesEdgesAndTokens) {
  Graph g = parse(R"IR(graph g() {
  %kv = state "kv" : f16[4,8]
  %x = input "x" : f32[1,8]
  %w = param "w" : f32[8]
  %s = input "s" : i32[1]
  %a, %n = add_rms_norm(%x, %x, %w) {eps=1e-06} : f32[1,8], f32[1,8]
  %t = kv_write(%kv, %a, %n, %s) {layer=0} : token[]
  return %t
})IR");
  const std::string dot = to_dot(g);
  EXPECT_NE(dot.find("digraph \"g\" {"), std::string::npos);
  EXPECT_NE(dot.find("n0 [label=\"%0 state \\\"kv\\\"\\nf16[4,8]\", shape=ellipse];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n4 [label=\"%4 add_rms_norm\\n{eps=1e-06}\\nf32[1,8], f32[1,8]\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n4 -> n5 [label=\"1\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n1 -> n4;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n5 -> out0;"), std::string::npos) << dot;
  // Each use is one edge: x is read twice by the add.
  size_t edges = 0;
  for (size_t p = dot.find("->"); p != std::string::npos; p = dot.find("->", p + 1)) ++edges;
  EXPECT_EQ(edges, 3u + 4u + 1u);
}

}  // namespace
}  // namespace kiln::graph
