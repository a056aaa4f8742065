// Text-in, text-out checks for passes: parse the input IR, run the pass, verify, and compare
// the printed result with the expected IR (parsed and printed again, so value numbering and
// spacing in the expectation do not matter, only the graph).
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "kiln/graph/parser.h"
#include "kiln/graph/passes/pass.h"
#include "kiln/graph/printer.h"

namespace kiln::graph::testing {

inline PassResult expect_rewrite(PassFn pass, std::string_view input, std::string_view expected) {
  Graph g = parse(input);
  PassResult r = pass(g, PassOptions{});
  EXPECT_NO_THROW(verify(g)) << print(g);
  EXPECT_EQ(print(g), print(parse(expected)));
  EXPECT_TRUE(r.changed);
  return r;
}

// The pass must report no change and leave the printed graph exactly as it was.
inline PassResult expect_unchanged(PassFn pass, std::string_view input) {
  Graph g = parse(input);
  const std::string before = print(g);
  PassResult r = pass(g, PassOptions{});
  EXPECT_EQ(print(g), before);
  EXPECT_FALSE(r.changed);
  return r;
}

}  // namespace kiln::graph::testing
