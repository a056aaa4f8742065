// The AMX tier of the quantized matmul (matmul_amx.cc): on hosts where the matrix engine is
// usable, every format's tiles (AMX for 32-input records, AVX-512 for the others, in the AMX
// tier's 16-row activation slabs) give the bits of the AVX-512 and scalar tiers (the contract
// of matmul_kernels.h) at every row count 1-64, with K of odd record counts and N not a multiple
// of 16, on one and two threads, through matmul, matmul_split and matmul_argmax. Elsewhere the
// tests say why they skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "kiln/base/amx.h"
#include "kiln/kernels/matmul.h"
#include "kiln/kernels/matmul_kernels.h"
#include "kiln/kernels/packed_weight.h"
#include "matmul_test_util.h"

namespace kiln::kernels {
namespace {

using testing::random_acts;
using testing::random_rows;
using testing::run_matmul;
using testing::run_threads;

// Restores the ISA cap and KILN_ISA's AMX choice when a test ends.
struct TierGuard {
  ~TierGuard() {
    set_isa_cap(Isa::Avx512);
    reset_amx_enabled();
  }
};

bool skip_without_amx() {
  if (best_isa() < Isa::Avx512) return true;
  return !amx_status().usable;
}
#define KILN_REQUIRE_AMX()               \
  if (skip_without_amx())                \
  GTEST_SKIP() << "no usable AMX here: " \
               << (amx_status().usable ? std::string("no AVX-512 tier") : amx_status().why)

// Which tier computes: 0 scalar, 1 AVX-512 without AMX, 2 AVX-512 with AMX.
void use_tier(int tier) {
  set_isa_cap(tier == 0 ? Isa::Scalar : Isa::Avx512);
  set_amx_enabled(tier == 2);
}

TEST(MatmulAmx, EveryFormatEqualsTheOtherTiersAtEveryRowCount) {
  KILN_REQUIRE_AMX();
  TierGuard guard;
  std::mt19937 rng(43);
  for (const QuantFormat& f : kQuantFormats) {
    const int64_t bs = f.block_size();
    // Formats of 32-input records run AMX; 16-input ones (Q6_K, Q3_K, Q2_K) stay on AVX-512.
    const bool amx_form = amx_tiles_for(f.dtype).rest != nullptr;
    EXPECT_EQ(amx_form, f.sub_block == 32) << dtype_name(f.dtype);
    // Odd record counts (one block; three), and a K whose expanded group fills tens of KiB.
    for (const int64_t k : {bs, 3 * bs, bs == 32 ? int64_t{1376} : int64_t{1536}}) {
      const int64_t n = 37;
      std::vector<uint8_t> bytes = random_rows(f.dtype, n, k, rng);
      const PackedWeight w = PackedWeight::pack(testing::borrow_rows(f.dtype, n, k, bytes));
      const auto x = random_acts(64, k, rng);
      use_tier(0);
      const auto expect = run_matmul(w, x, 64, 1);  // each row is its own: row i of 64 = row i of m
      for (int64_t m = 1; m <= 64; ++m) {
        use_tier(1);
        const auto avx512 = run_matmul(w, x, m, 2);
        use_tier(2);
        const int64_t before = amx_matmuls_run();
        const auto amx = run_matmul(w, x, m, (m % 2) + 1);
        if (m >= kAmxMinRows && amx_form) {
          EXPECT_GT(amx_matmuls_run(), before) << "AMX did not run";
        }
        for (int64_t e = 0; e < m * n; ++e) {
          ASSERT_EQ(amx[e], expect[e]) << dtype_name(f.dtype) << " k " << k << " m " << m << " row "
                                       << e / n << " col " << e % n;
          ASSERT_EQ(avx512[e], expect[e]) << dtype_name(f.dtype) << " avx512 m " << m;
        }
      }
    }
  }
}

// The split outputs and the greedy head read the same AMX tiles (16-row tiles at their
// epilogues), and a weight merging two formats (Q4_K on AMX, Q6_K on the AVX-512 pair kernels)
// keeps one activation layout for both.
TEST(MatmulAmx, SplitArgmaxAndMergedWeights) {
  KILN_REQUIRE_AMX();
  TierGuard guard;
  std::mt19937 rng(44);
  const int64_t k = 512, m = 45;
  std::vector<uint8_t> a_bytes = random_rows(DType::Q4_K, 40, k, rng);
  std::vector<uint8_t> b_bytes = random_rows(DType::Q6_K, 29, k, rng);
  const PackedWeight w =
      PackedWeight::pack_concat({testing::borrow_rows(DType::Q4_K, 40, k, a_bytes),
                                 testing::borrow_rows(DType::Q6_K, 29, k, b_bytes)});
  const auto x = random_acts(m, k, rng);
  use_tier(0);
  const auto expect = run_matmul(w, x, m, 1);
  use_tier(2);
  const int64_t before = amx_matmuls_run();
  std::vector<float> a(m * 21), b(m * 48);
  float* outs[] = {a.data(), b.data()};
  const int64_t cols[] = {21, 48};
  std::vector<uint8_t> scratch(matmul_argmax_scratch_bytes(w, m, 2));
  run_threads(2, [&](const ExecContext& ctx) {
    matmul_split(w, x.data(), m, outs, cols, 2, scratch.data(), ctx);
  });
  std::vector<int32_t> ids(m);
  run_threads(2, [&](const ExecContext& ctx) {
    matmul_argmax(w, x.data(), m, ids.data(), scratch.data(), ctx);
  });
  EXPECT_GT(amx_matmuls_run(), before);
  const int64_t n = w.n();
  for (int64_t i = 0; i < m; ++i) {
    const float* row = &expect[i * n];
    for (int64_t c = 0; c < n; ++c)
      ASSERT_EQ(c < 21 ? a[i * 21 + c] : b[i * 48 + c - 21], row[c]) << "row " << i << " col " << c;
    ASSERT_EQ(ids[i], std::max_element(row, row + n) - row) << "row " << i;
  }
}

// KILN_ISA=avx512 (here set_amx_enabled(false)) and lower tiers keep the vector kernels.
TEST(MatmulAmx, OffUnlessEnabledAndAvx512) {
  KILN_REQUIRE_AMX();
  TierGuard guard;
  set_amx_enabled(true);
  EXPECT_TRUE(amx_active());
  set_amx_enabled(false);
  EXPECT_FALSE(amx_active());
  set_amx_enabled(true);
  set_isa_cap(Isa::Avx2);
  EXPECT_FALSE(amx_active());
  std::mt19937 rng(45);
  std::vector<uint8_t> bytes = random_rows(DType::Q8_0, 16, 64, rng);
  const PackedWeight w = PackedWeight::pack(testing::borrow_rows(DType::Q8_0, 16, 64, bytes));
  const int64_t before = amx_matmuls_run();
  (void)run_matmul(w, random_acts(40, 64, rng), 40, 1);
  EXPECT_EQ(amx_matmuls_run(), before);
}

}  // namespace
}  // namespace kiln::kernels
