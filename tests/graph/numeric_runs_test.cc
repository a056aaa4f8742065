// The comparison the numeric graph tests rely on must itself see every kind of difference.
#include "graph/numeric_runs.h"

#include <gtest/gtest.h>

#include <cstring>

#include "graph/random_weights.h"
#include "kiln/base/error.h"

namespace kiln::graph {
namespace {

testing::RunResult result() {
  testing::RunResult r;
  r.outputs.push_back(testing::random_tensor(DType::F32, {3, 5}, 1));
  r.kv_pool = testing::random_tensor(DType::F16, {2, 4, 16, 8}, 2);
  return r;
}

TEST(NumericRuns, SameBitsSeesOutputAndKvPoolDifferences) {
  EXPECT_TRUE(testing::same_bits(result(), result()));
  testing::RunResult r = result();
  r.outputs[0].data_as<uint32_t>()[7] ^= 1;  // one ulp
  EXPECT_FALSE(testing::same_bits(result(), r));
  r = result();
  r.kv_pool.data_as<uint16_t>()[300] ^= 1;
  EXPECT_FALSE(testing::same_bits(result(), r));
  r = result();
  r.kv_pool = Tensor();
  EXPECT_FALSE(testing::same_bits(result(), r));
  r = result();
  r.outputs[0] = r.outputs[0].reshaped({5, 3});
  EXPECT_FALSE(testing::same_bits(result(), r));
}

TEST(NumericRuns, RandomWeightsDependOnlyOnSeedAndName) {
  testing::RandomWeights a(5), b(5), c(6);
  const ValueType t{DType::Q4_K, Shape{3, 256}};
  const Tensor& x = a.tensor("w", t);
  EXPECT_EQ(std::memcmp(x.data(), b.tensor("w", t).data(), x.nbytes()), 0);
  EXPECT_NE(std::memcmp(x.data(), c.tensor("w", t).data(), x.nbytes()), 0);
  EXPECT_NE(std::memcmp(x.data(), a.tensor("w2", t).data(), x.nbytes()), 0);
  // A name re-declared with another type is a test bug, reported as such.
  EXPECT_THROW(a.tensor("w", ValueType{DType::Q8_0, Shape{3, 256}}), Error);
}

}  // namespace
}  // namespace kiln::graph
