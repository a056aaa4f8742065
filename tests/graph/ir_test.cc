#include <gtest/gtest.h>

#include "graph/test_graphs.h"
#include "kiln/base/error.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/printer.h"

namespace kiln::graph {
namespace {

TEST(Ir, ToyDecoderRoundTrips) {
  for (bool gemma : {true, false}) {
    testing::ToyConfig c;
    c.gemma = gemma;
    Graph g = testing::build_toy_decoder(c);
    const std::string text = print(g);
    Graph back = parse(text);
    std::string why;
    EXPECT_TRUE(structurally_equal(g, back, &why)) << why;
    EXPECT_EQ(print(back), text);
  }
}

}  // namespace
}  // namespace kiln::graph
