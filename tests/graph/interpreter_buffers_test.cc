// The interpreter drops each value after its last reader and reuses the buffers: a long chain
// of ops needs a few buffers, not one per op, and a second run allocates nothing new.
#include <gtest/gtest.h>

#include <cstring>

#include "graph/numeric_runs.h"
#include "graph/random_weights.h"
#include "kiln/graph/builder.h"

namespace kiln::graph {
namespace {

TEST(InterpreterBuffers, ValuesAreDroppedAfterTheirLastReaderAndReused) {
  const int64_t n = 1024;  // 4 KiB per value: one size class
  const int chain = 40;
  Builder b("chain");
  Value x = b.input("x", DType::F32, {n});
  Value v = x;
  for (int i = 0; i < chain; ++i) v = b.add(b.scale(v, 0.5), x);  // x is read to the end
  b.output(v);
  Graph g = b.finish();
  testing::RandomWeights weights(1);
  ThreadPool pool(2);
  Interpreter interp(pool, weights, KvGeometry{});
  const std::vector<Binding> in = {testing::random_input("x", {n}, 2)};

  std::vector<Tensor> first = interp.run(g, in);
  const size_t after_first = interp.buffers().allocated_bytes();
  // 80 values were computed; at any time only a value, its successor and the output live.
  EXPECT_LE(after_first, 4u * 4096) << "values kept past their last reader";
  std::vector<float> want(first[0].data_as<float>(), first[0].data_as<float>() + n);
  first.clear();

  std::vector<Tensor> second = interp.run(g, in);
  EXPECT_EQ(interp.buffers().allocated_bytes(), after_first) << "second run did not reuse";
  EXPECT_EQ(std::memcmp(second[0].data(), want.data(), n * 4), 0);  // stale bytes never leak
}

}  // namespace
}  // namespace kiln::graph
