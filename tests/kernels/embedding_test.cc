#include "kiln/kernels/embedding.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "matmul_test_util.h"

namespace kiln::kernels {
namespace {

// Each token's row is the dequantized table row; out-of-range ids give zeros and never read
// outside the table; tokens split over threads.
TEST(Embedding, LooksUpDequantizedRows) {
  std::mt19937 rng(20);
  for (DType t : testing::weight_dtypes()) {
    const int64_t vocab = 50, dim = dtype_info(t).block_size == 256 ? 512 : 64;
    auto table = testing::random_rows(t, vocab, dim, rng);
    auto ref = testing::dequantize_all(t, vocab, dim, table);
    std::vector<int32_t> ids = {0, 49, 7, -1, 50, 7, 1 << 30, 23};
    const int64_t T = static_cast<int64_t>(ids.size());
    std::vector<float> out(T * dim, -5.0f);
    testing::run_threads(3, [&](const ExecContext& ctx) {
      embedding(t, table.data(), vocab, dim, ids.data(), T, out.data(), ctx);
    });
    for (int64_t i = 0; i < T; ++i) {
      bool valid = ids[i] >= 0 && ids[i] < vocab;
      for (int64_t j = 0; j < dim; ++j)
        ASSERT_EQ(out[i * dim + j], valid ? ref[ids[i] * dim + j] : 0.0f)
            << dtype_name(t) << " token " << i;
    }
  }
}

TEST(Embedding, RejectsBadShapes) {
  std::vector<uint8_t> table(34 * 4);
  int32_t id = 0;
  float out[64];
  EXPECT_THROW(embedding(DType::Q8_0, table.data(), 4, 33, &id, 1, out, {}), Error);
  EXPECT_THROW(embedding(DType::Token, table.data(), 4, 32, &id, 1, out, {}), Error);
}

}  // namespace
}  // namespace kiln::kernels
