// The one derivation of the KV pool and step shapes (serving_geometry.h) that Runtime, the
// runners and `kiln graph` share.
#include "kiln/engine/serving_geometry.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"

namespace kiln::engine {
namespace {

model::ModelConfig small_model() {
  model::ModelConfig c;
  c.n_layers = 4;
  c.n_kv_heads = 2;
  c.head_dim = 64;
  c.context_length = 2048;
  return c;
}

TEST(ServingGeometry, DefaultPoolIsTheMemoryOf65536F16Tokens) {
  const ServingGeometry f16 = derive_serving_geometry(small_model(), {});
  EXPECT_EQ(f16.kv.n_pages * f16.kv.page_size, 65536);
  EXPECT_EQ(f16.context_length, 2048);  // the model's, below the pool
  EXPECT_EQ(f16.max_pages_per_seq, 2048 / 16);
  const ServingGeometry q8 =
      derive_serving_geometry(small_model(), {.kv_dtype = kernels::KvDtype::Q8});
  // Same bytes: the q8 pool holds more tokens (int8 values plus their scales).
  EXPECT_GT(q8.kv.n_pages, f16.kv.n_pages * 3 / 2);
  EXPECT_LE(kernels::kv_bytes_per_token(q8.kv.geometry()) * q8.kv.n_pages * q8.kv.page_size,
            kernels::kv_bytes_per_token(f16.kv.geometry()) * 65536 + 16 * 1024);
}

TEST(ServingGeometry, ContextIsCappedByThePoolAndPagesRoundUp) {
  const ServingGeometry g = derive_serving_geometry(
      small_model(), {.kv_tokens = 1000, .context_length = 4096, .page_size = 32});
  EXPECT_EQ(g.kv.n_pages, 32);  // ceil(1000 / 32)
  EXPECT_EQ(g.context_length, 1000);
  EXPECT_EQ(g.max_pages_per_seq, 32);
  EXPECT_EQ(g.kv.n_layers, 4);
  EXPECT_EQ(g.kv.n_kv_heads, 2);
  EXPECT_EQ(g.kv.head_dim, 64);
  const ServingGeometry shorter =
      derive_serving_geometry(small_model(), {.kv_tokens = 1000, .context_length = 100});
  EXPECT_EQ(shorter.context_length, 100);
  EXPECT_EQ(shorter.max_pages_per_seq, 7);  // ceil(100 / 16)
}

TEST(ServingGeometry, ForwardShapeDescribesThePool) {
  const ServingGeometry g = derive_serving_geometry(
      small_model(), {.kv_tokens = 512, .page_size = 8, .kv_dtype = kernels::KvDtype::Q8});
  const model::ForwardShape s = g.forward_shape(3, 5, true);
  EXPECT_EQ(s.seqs, 3);
  EXPECT_EQ(s.tokens, 5);
  EXPECT_TRUE(s.greedy);
  EXPECT_EQ(s.logit_rows, -1);
  EXPECT_EQ(s.kv_pages, 64);
  EXPECT_EQ(s.page_size, 8);
  EXPECT_EQ(s.kv_dtype, kernels::KvDtype::Q8);
  EXPECT_EQ(s.max_pages_per_seq, g.max_pages_per_seq);
}

TEST(ServingGeometry, RefusesPageSizesOutOfRange) {
  for (int page : {0, -16, 1025}) {
    EXPECT_THROW(derive_serving_geometry(small_model(), {.page_size = page}), Error) << page;
  }
}

}  // namespace
}  // namespace kiln::engine
