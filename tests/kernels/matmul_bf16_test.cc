// The bf16 contract (base/amx.h, matmul_bf16_amx.cc), on hosts with AMX-BF16: each format's
// decompression gives exactly dequantize_row's weights rounded to bf16; the products equal a
// float64 sum of the bf16-rounded operands within f32 rounding (TDPBF16PS's own order of sums is
// not reproducible by a scalar loop, so that is the reference there is); and every row's bits are
// the same at every row count, on one and two threads, through several passes of rows and
// groups decompressed in chunks, through matmul_split, matmul_argmax and merged weights.
// Elsewhere the tests say why they skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
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

// Switches the bf16 contract on for a test, and everything back when it ends.
struct Bf16Guard {
  Bf16Guard() {
    set_isa_cap(Isa::Avx512);
    set_amx_enabled(true);
    set_bf16_contract(true);
  }
  ~Bf16Guard() {
    reset_bf16_contract();
    reset_amx_enabled();
  }
};

#define KILN_REQUIRE_AMX_BF16()                                                            \
  if (best_isa() < Isa::Avx512 || !bf16_contract_usable())                                 \
  GTEST_SKIP() << "no AMX-BF16 here: "                                                     \
               << (amx_status().usable ? std::string("no AVX-512 tier or no AMX-BF16 bit") \
                                       : amx_status().why)

// Round to nearest even, as VCVTNE2PS2BF16 does (its inputs here are finite).
float bf16_round(float v) {
  uint32_t u = std::bit_cast<uint32_t>(v);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  return std::bit_cast<float>(u);
}

std::vector<float> dequantized(const PackedWeight& w) {
  std::vector<float> out(w.n() * w.k());
  for (int64_t r = 0; r < w.n(); ++r) w.dequantize_row(r, &out[r * w.k()]);
  return out;
}

PackedWeight random_weight(DType t, int64_t n, int64_t k, std::mt19937& rng) {
  std::vector<uint8_t> bytes = random_rows(t, n, k, rng);
  return PackedWeight::pack(testing::borrow_rows(t, n, k, bytes));
}

TEST(MatmulBf16, DecompressionIsDequantizeRowRoundedToBf16) {
  KILN_REQUIRE_AMX_BF16();
  Bf16Guard guard;
  std::mt19937 rng(47);
  for (const QuantFormat& f : kQuantFormats) {
    const int64_t k = 3 * f.block_size();
    const PackedWeight w = random_weight(f.dtype, 16, k, rng);
    const std::vector<float> ref = dequantized(w);
    Bf16DecompressFn decompress = bf16_decompress_fn(f.dtype);
    ASSERT_NE(decompress, nullptr) << dtype_name(f.dtype);
    std::vector<uint16_t> out(k * 16, 0xFFFF);
    decompress(w.data(), k, 0, k / f.sub_block, out.data());
    for (int64_t c = 0; c < 16; ++c) {
      for (int64_t j = 0; j < k; ++j) {
        // Pair p = j / 2 of column c is dword p * 16 + c.
        const uint16_t got = out[((j / 2) * 16 + c) * 2 + j % 2];
        const float want = bf16_round(ref[c * k + j]);
        ASSERT_EQ(std::bit_cast<float>(uint32_t{got} << 16), want)
            << dtype_name(f.dtype) << " col " << c << " input " << j;
      }
    }
    // A later range of records lands at the start of out.
    std::vector<uint16_t> tail(k * 16);
    const int64_t s0 = k / f.sub_block - 1;
    decompress(w.data(), k, s0, s0 + 1, tail.data());
    EXPECT_TRUE(std::equal(tail.begin(), tail.begin() + 16 * f.sub_block,
                           out.begin() + s0 * 16 * f.sub_block))
        << dtype_name(f.dtype);
  }
}

// Every format, K of one block and of several; every row count 1-64 and two passes of 64 rows.
TEST(MatmulBf16, EveryFormatMatchesBf16OperandsAndIsBatchInvariant) {
  KILN_REQUIRE_AMX_BF16();
  Bf16Guard guard;
  std::mt19937 rng(48);
  for (const QuantFormat& f : kQuantFormats) {
    for (const int64_t k : {int64_t{f.block_size()}, int64_t{1536}}) {
      const int64_t n = 37, rows = 130;
      const PackedWeight w = random_weight(f.dtype, n, k, rng);
      const std::vector<float> wd = dequantized(w);
      const auto x = random_acts(rows, k, rng);
      const int64_t before = bf16_matmuls_run();
      const auto all = run_matmul(w, x, rows, 2);
      EXPECT_GT(bf16_matmuls_run(), before) << "the bf16 tiles did not run";
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t c = 0; c < n; ++c) {
          double sum = 0, magnitude = 0;
          for (int64_t j = 0; j < k; ++j) {
            const double p = static_cast<double>(bf16_round(x[i * k + j])) *
                             static_cast<double>(bf16_round(wd[c * k + j]));
            sum += p;
            magnitude += std::fabs(p);
          }
          // f32 sums of k terms in any order: within k ulps of the magnitude (a misplaced pair
          // of one 32-input block is a whole term off, far more at k = 32).
          const double tol = static_cast<double>(k) * 0x1p-24 * magnitude + 1e-30;
          ASSERT_NEAR(all[i * n + c], sum, tol)
              << dtype_name(f.dtype) << " k " << k << " row " << i << " col " << c;
        }
      }
      for (int64_t m = 1; m <= 64; ++m) {
        const auto part = run_matmul(w, x, m, (m % 2) + 1);
        for (int64_t e = 0; e < m * n; ++e)
          ASSERT_EQ(part[e], all[e]) << dtype_name(f.dtype) << " k " << k << " m " << m << " row "
                                     << e / n << " col " << e % n;
      }
    }
  }
}

// A group too large for the decompression buffer (K = 12800 > 12288 inputs) is decompressed
// chunk by chunk for each pass of 64 rows, with the same bits.
TEST(MatmulBf16, ChunkedGroupsKeepTheBits) {
  KILN_REQUIRE_AMX_BF16();
  Bf16Guard guard;
  std::mt19937 rng(49);
  const int64_t k = 12800, n = 20, rows = 70;
  const PackedWeight w = random_weight(DType::Q8_0, n, k, rng);
  const auto x = random_acts(rows, k, rng);
  const auto all = run_matmul(w, x, rows, 2);
  for (const int64_t m : {int64_t{1}, int64_t{17}}) {
    const auto part = run_matmul(w, x, m, 1);
    for (int64_t e = 0; e < m * n; ++e) ASSERT_EQ(part[e], all[e]) << "m " << m << " at " << e;
  }
  // And the whole group agrees with the bf16 operands' product.
  const std::vector<float> wd = dequantized(w);
  double sum = 0, magnitude = 0;
  for (int64_t j = 0; j < k; ++j) {
    const double p = static_cast<double>(bf16_round(x[j])) * bf16_round(wd[j]);
    sum += p;
    magnitude += std::fabs(p);
  }
  EXPECT_NEAR(all[0], sum, static_cast<double>(k) * 0x1p-24 * magnitude);
}

// matmul_split and matmul_argmax read the same tiles, and a merged weight's segments (Q4_K,
// Q6_K, and an F16 one, which keeps its f32 tiles on the f32 rows) give the separate weights'
// columns.
TEST(MatmulBf16, SplitArgmaxAndMergedWeights) {
  KILN_REQUIRE_AMX_BF16();
  Bf16Guard guard;
  std::mt19937 rng(50);
  const int64_t k = 512, m = 45;
  std::vector<uint8_t> a_bytes = random_rows(DType::Q4_K, 40, k, rng);
  std::vector<uint8_t> b_bytes = random_rows(DType::Q6_K, 29, k, rng);
  std::vector<uint8_t> c_bytes = random_rows(DType::F16, 16, k, rng);
  const Tensor a_rows = testing::borrow_rows(DType::Q4_K, 40, k, a_bytes);
  const Tensor b_rows = testing::borrow_rows(DType::Q6_K, 29, k, b_bytes);
  const Tensor c_rows = testing::borrow_rows(DType::F16, 16, k, c_bytes);
  const PackedWeight w = PackedWeight::pack_concat({a_rows, b_rows, c_rows});
  const auto x = random_acts(m, k, rng);
  const auto expect = run_matmul(w, x, m, 2);
  const int64_t n = w.n();
  int64_t col0 = 0;
  for (const Tensor* t : {&a_rows, &b_rows, &c_rows}) {
    const PackedWeight alone = PackedWeight::pack(*t);
    const auto y = run_matmul(alone, x, m, 1);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t c = 0; c < alone.n(); ++c)
        ASSERT_EQ(y[i * alone.n() + c], expect[i * n + col0 + c]) << "row " << i << " col " << c;
    col0 += alone.n();
  }
  std::vector<float> a(m * 21), b(m * (n - 21));
  float* outs[] = {a.data(), b.data()};
  const int64_t cols[] = {21, n - 21};
  std::vector<uint8_t> scratch(matmul_argmax_scratch_bytes(w, m, 2));
  run_threads(2, [&](const ExecContext& ctx) {
    matmul_split(w, x.data(), m, outs, cols, 2, scratch.data(), ctx);
  });
  std::vector<int32_t> ids(m);
  run_threads(2, [&](const ExecContext& ctx) {
    matmul_argmax(w, x.data(), m, ids.data(), scratch.data(), ctx);
  });
  for (int64_t i = 0; i < m; ++i) {
    const float* row = &expect[i * n];
    for (int64_t c = 0; c < n; ++c)
      ASSERT_EQ(c < 21 ? a[i * 21 + c] : b[i * (n - 21) + c - 21], row[c])
          << "row " << i << " col " << c;
    ASSERT_EQ(ids[i], std::max_element(row, row + n) - row) << "row " << i;
  }
}

// Off unless asked for; AMX switched off (KILN_ISA=avx512) keeps the int8 contract, whose bits
// are the scalar tier's.
TEST(MatmulBf16, OnlyWhenAskedForAndAmxIsOn) {
  KILN_REQUIRE_AMX_BF16();
  Bf16Guard guard;
  EXPECT_TRUE(bf16_contract_active());
  EXPECT_EQ(matmul_contract_summary(), "bf16");
  EXPECT_EQ(matmul_tier_name(), "avx512+amx-bf16");
  std::mt19937 rng(51);
  const PackedWeight w = random_weight(DType::Q4_0, 16, 64, rng);
  const auto x = random_acts(3, 64, rng);
  set_amx_enabled(false);
  EXPECT_FALSE(bf16_contract_active());
  EXPECT_NE(matmul_contract_summary().find("bf16 asked for"), std::string::npos);
  const int64_t before = bf16_matmuls_run();
  const auto int8 = run_matmul(w, x, 3, 1);
  EXPECT_EQ(bf16_matmuls_run(), before);
  set_isa_cap(Isa::Scalar);
  EXPECT_EQ(run_matmul(w, x, 3, 1), int8);
  set_isa_cap(Isa::Avx512);
  set_amx_enabled(true);
  set_bf16_contract(false);
  EXPECT_FALSE(bf16_contract_active());
  EXPECT_EQ(matmul_contract_summary(), "int8");
  EXPECT_EQ(run_matmul(w, x, 3, 1), int8);
}

}  // namespace
}  // namespace kiln::kernels
