#include "kiln/kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/base/error.h"
#include "kiln/kernels/matmul_kernels.h"
#include "matmul_test_util.h"

namespace kiln::kernels {
namespace {

using testing::random_acts;
using testing::random_rows;
using testing::run_matmul;
using testing::run_threads;
using testing::weight_dtypes;

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// K values with tails: odd counts of blocks (float types: odd lengths).
std::vector<int64_t> test_ks(DType t) {
  if (is_float(t)) return {1, 7, 33};
  int bs = dtype_info(t).block_size;
  return bs == 32 ? std::vector<int64_t>{32, 96, 224} : std::vector<int64_t>{256, 768};
}

struct Problem {
  DType t;
  int64_t n, k;
  std::vector<uint8_t> bytes;
  PackedWeight w;
};

Problem make_problem(DType t, int64_t n, int64_t k, std::mt19937& rng) {
  Problem p{t, n, k, random_rows(t, n, k, rng), {}};
  p.w = PackedWeight::pack(testing::borrow_rows(t, n, k, p.bytes));
  return p;
}

// --- An independent statement of the arithmetic contract (matmul_kernels.h), written from the
// GGUF blocks (decode_block) rather than the packed layout the kernels read.
struct RefActs {
  std::vector<int8_t> q;
  std::vector<float> d;
};

RefActs reference_quantize(const float* x, int64_t k) {
  RefActs a{std::vector<int8_t>(k), std::vector<float>(k / 32)};
  for (int64_t b = 0; b < k / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    a.d[b] = amax / 127.0f;
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) {
      long c = std::lrint(x[b * 32 + j] * inv);
      a.q[b * 32 + j] = static_cast<int8_t>(std::clamp(c, -127L, 127L));
    }
  }
  return a;
}

float contract_reference(const Problem& p, const float* x, int64_t col) {
  if (is_float(p.t)) {
    std::vector<float> w(p.k);
    dequantize_row(p.t, p.bytes.data() + col * dtype_bytes(p.t, p.k), w.data(), p.k);
    float acc = 0;
    for (int64_t k = 0; k < p.k; ++k) acc = std::fma(x[k], w[k], acc);
    return acc;
  }
  const QuantFormat& qs = quant_format(p.t);
  RefActs a = reference_quantize(x, p.k);
  const uint8_t* row = p.bytes.data() + col * dtype_bytes(p.t, p.k);
  float acc = 0;
  for (int64_t b = 0; b < p.k / qs.block_size(); ++b) {
    uint8_t codes[256];
    float scale[16], min[16];
    decode_block(p.t, row + b * qs.block_bytes(), codes, scale, min);
    for (int s = 0; s < qs.block_size() / qs.sub_block; ++s) {
      int64_t k0 = b * qs.block_size() + s * qs.sub_block;
      int32_t dot = 0, sum = 0;
      for (int j = 0; j < qs.sub_block; ++j) {
        int c = qs.code_value(codes[s * qs.sub_block + j]) - (qs.has_min ? 0 : qs.zero_point);
        dot += c * a.q[k0 + j];
      }
      float d = a.d[k0 / 32];
      acc = std::fma(static_cast<float>(dot), scale[s] * d, acc);
      if (qs.has_min) {  // the sub-block's activation codes (32, or Q2_K's 16)
        for (int j = 0; j < qs.sub_block; ++j) sum += a.q[k0 + j];
        acc = std::fma(-min[s], d * static_cast<float>(sum), acc);
      }
    }
  }
  return acc;
}

// Bound on |quantized-activation result - exact f32 product|: each activation moves by at most
// half its block's step d_b = amax_b / 127 (plus the rounding of x * 127 / amax), so the error is
// at most sum_b 0.51 d_b sum_{k in b} |w_k|; float accumulation adds a few ulps of sum |w_k x_k|.
double error_bound(DType t, const float* w, const float* x, int64_t k) {
  double wx = 0, quant = 0;
  for (int64_t i = 0; i < k; ++i) wx += std::fabs(static_cast<double>(w[i]) * x[i]);
  if (!is_float(t)) {
    for (int64_t b = 0; b < k / 32; ++b) {
      double amax = 0, wsum = 0;
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::fabs(static_cast<double>(x[b * 32 + j])));
        wsum += std::fabs(w[b * 32 + j]);
      }
      quant += 0.51 * amax / 127.0 * wsum;
    }
  }
  return quant + 4.0 * (k + 8) * 6e-8 * wx + 1e-30;
}

// Every tier equals the contract bit for bit, and the f32 product within the stated bound,
// for every dtype, K with tails, N not a multiple of 16, and m = 1..33.
TEST(Matmul, EveryTierMatchesReferenceForEveryDtype) {
  testing::IsaCapGuard guard;
  std::mt19937 rng(10);
  for (DType t : weight_dtypes()) {
    for (int64_t k : test_ks(t)) {
      Problem p = make_problem(t, 19, k, rng);
      auto wf = testing::dequantize_all(t, p.n, k, p.bytes);
      const int64_t m_max = 33;
      auto x = random_acts(m_max, k, rng);
      std::vector<float> expect(m_max * p.n);
      for (int64_t i = 0; i < m_max; ++i) {
        for (int64_t c = 0; c < p.n; ++c) {
          expect[i * p.n + c] = contract_reference(p, &x[i * k], c);
          double exact = 0;
          for (int64_t j = 0; j < k; ++j)
            exact += static_cast<double>(wf[c * k + j]) * x[i * k + j];
          ASSERT_LE(std::fabs(expect[i * p.n + c] - exact),
                    error_bound(t, &wf[c * k], &x[i * k], k))
              << dtype_name(t) << " k " << k;
        }
      }
      for (Isa isa : testing::isa_tiers()) {
        set_isa_cap(isa);
        for (int64_t m : {1, 2, 3, 4, 5, 8, 13, 33}) {
          auto y = run_matmul(p.w, x, m);
          for (int64_t e = 0; e < m * p.n; ++e)
            ASSERT_EQ(y[e], expect[e]) << dtype_name(t) << " " << isa_name(isa) << " k " << k
                                       << " m " << m << " row " << e / p.n << " col " << e % p.n;
        }
      }
    }
  }
}

// All m = 1..33 on the tier in use, two threads (every tile height and tail), for every
// quantized format of the table and one float type.
TEST(Matmul, AllBatchSizesTwoThreads) {
  std::mt19937 rng(11);
  std::vector<DType> types{DType::BF16};
  for (const QuantFormat& f : kQuantFormats) types.push_back(f.dtype);
  for (DType t : types) {
    int64_t k = is_float(t) ? 40 : dtype_info(t).block_size * 2;
    Problem p = make_problem(t, 35, k, rng);
    auto x = random_acts(33, k, rng);
    for (int64_t m = 1; m <= 33; ++m) {
      auto y = run_matmul(p.w, x, m, 2);
      for (int64_t e = 0; e < m * p.n; ++e)
        ASSERT_EQ(y[e], contract_reference(p, &x[(e / p.n) * k], e % p.n))
            << dtype_name(t) << " m " << m;
    }
  }
}

// Several row tiles read a group unpacked once into a per-thread buffer: up to K ~ 9.8K (K =
// 8960, the down projection of Qwen2.5 1.5B: 175 KiB expanded as Q4_K); a group too large for it
// (K = 16384: 278 KiB of 8-bit Q5_0 codes) is unpacked per tile. Both give the contract, for
// every format the table expands.
TEST(Matmul, LargeGroupsUnpackedOnceOrPerTileStillMatch) {
  std::mt19937 rng(13);
  for (const QuantFormat& f : kQuantFormats) {
    if (!f.expand_for_many_rows) continue;
    const DType t = f.dtype;
    for (const int64_t k : {8960, 16384}) {
      Problem p = make_problem(t, 20, k, rng);
      auto x = random_acts(13, k, rng);
      auto y = run_matmul(p.w, x, 13, 2);
      for (int64_t e = 0; e < 13 * p.n; ++e)
        ASSERT_EQ(y[e], contract_reference(p, &x[(e / p.n) * k], e % p.n))
            << dtype_name(t) << " k " << k << " row " << e / p.n;
    }
  }
}

// From 2 rows the AVX2 tier runs its many-row tiles (matmul_gemm_avx2.cc): groups expanded to
// 8-bit records in chunks by the first 4-row slab's pass (which sums 4-bit words in another
// order), the other slabs reading the expansion, rows in blocks of 64. They equal the scalar tier
// bit for bit: m with remainders of every sub-tile and row block (8, 9, 17, 33, 100, 513), K inside
// one chunk, exactly filling it, one sub-block over it (a last chunk of one record) and 8192 (two
// chunks, re-expanded per block of rows); with 2 threads, and through matmul_split and
// matmul_argmax, whose epilogues then see tiles of up to 64 rows.
TEST(Matmul, ManyRowsMatchScalarTier) {
  if (best_isa() == Isa::Scalar) GTEST_SKIP() << "no AVX2 on this machine";
  testing::IsaCapGuard guard;
  std::mt19937 rng(15);
  for (DType t : weight_dtypes()) {
    if (is_float(t)) continue;
    const ChunkTiles ct = chunk_tiles_avx2(t);
    ASSERT_NE(ct.tile, nullptr) << dtype_name(t);
    ASSERT_NE(ct.first, nullptr) << dtype_name(t);
    const int64_t bs = dtype_info(t).block_size;
    const int64_t fit = static_cast<int64_t>(kChunkBufferBytes / ct.record_bytes) * ct.sub_block;
    std::vector<std::pair<int64_t, std::vector<int64_t>>> cases = {
        {bs * 2, {2, 3, 8, 9, 17, 33, 100, 513}}, {8192, {3, 9, 67}}};
    if (fit % bs == 0) cases.push_back({fit, {13}});
    if (ct.expanded) cases.push_back({(fit / bs + 1) * bs, {13, 70}});
    for (const auto& [k, ms] : cases) {
      Problem p = make_problem(t, 37, k, rng);
      const int64_t m_max = *std::max_element(ms.begin(), ms.end());
      auto x = random_acts(m_max, k, rng);
      for (int64_t m : ms) {
        set_isa_cap(Isa::Scalar);
        auto expect = run_matmul(p.w, x, m);
        set_isa_cap(Isa::Avx2);
        auto y = run_matmul(p.w, x, m, 2);
        for (int64_t e = 0; e < m * p.n; ++e)
          ASSERT_EQ(y[e], expect[e]) << dtype_name(t) << " k " << k << " m " << m << " row "
                                     << e / p.n << " col " << e % p.n;
      }
    }
  }
  // Split outputs and the greedy head over the same many-row tiles.
  Problem p = make_problem(DType::Q4_K, 45, 512, rng);
  const int64_t m = 100;
  auto x = random_acts(m, 512, rng);
  set_isa_cap(Isa::Scalar);
  auto expect = run_matmul(p.w, x, m);
  set_isa_cap(Isa::Avx2);
  std::vector<float> a(m * 20), b(m * 25);
  float* outs[] = {a.data(), b.data()};
  const int64_t cols[] = {20, 25};
  std::vector<uint8_t> scratch(matmul_argmax_scratch_bytes(p.w, m, 2));
  run_threads(2, [&](const ExecContext& ctx) {
    matmul_split(p.w, x.data(), m, outs, cols, 2, scratch.data(), ctx);
  });
  std::vector<int32_t> ids(m);
  run_threads(2, [&](const ExecContext& ctx) {
    matmul_argmax(p.w, x.data(), m, ids.data(), scratch.data(), ctx);
  });
  for (int64_t i = 0; i < m; ++i) {
    const float* row = &expect[i * p.n];
    for (int64_t c = 0; c < p.n; ++c)
      ASSERT_EQ(c < 20 ? a[i * 20 + c] : b[i * 25 + c - 20], row[c]) << "row " << i << " col " << c;
    ASSERT_EQ(ids[i], std::max_element(row, row + p.n) - row) << "row " << i;
  }
}

// Both AVX2 tile kinds sum vpmaddubsw pairs in int16 (avx2::words_per_madd): 8 pairs of 4-bit
// codes, 4 of 5-bit, 2 of 6-bit, all 4 of a 16-input record of 2- or 3-bit codes. The largest codes
// times the largest activations (all inputs equal: every code 127, or -127) must still give the
// scalar tier's bits: random codes would not reach an int16 overflow if a type's sums were one word
// too long. Row 1 runs the decode tiles (matmul_avx2.cc), 2 to 12 the many-row tiles
// (matmul_gemm_avx2.cc; 2 and 3 one partial slab, 12 three slabs).
TEST(Matmul, LargestCodesDoNotOverflowInAnyTile) {
  if (best_isa() == Isa::Scalar) GTEST_SKIP() << "no AVX2 on this machine";
  testing::IsaCapGuard guard;
  std::mt19937 rng(16);
  for (const QuantFormat& f : kQuantFormats) {
    if (!f.expand_for_many_rows) continue;  // 8-bit codes: no word sums to overflow
    const DType t = f.dtype;
    for (const int64_t m : {1, 2, 3, 8, 12}) {
      const int64_t k = 512, n = 16;
      std::vector<uint8_t> bytes = random_rows(t, n, k, rng);
      // Every byte but the f16 scales (d, and dmin) to all ones: the largest codes.
      const auto block_bytes = static_cast<size_t>(f.block_bytes());
      auto is_scale = [&](size_t j) {
        auto in = [&](int offset) {
          return offset >= 0 && j >= size_t(offset) && j < size_t(offset) + 2;
        };
        return in(f.d_offset) || in(f.dmin_offset);
      };
      for (size_t b = 0; b < bytes.size(); b += block_bytes) {
        for (size_t j = 0; j < block_bytes; ++j)
          if (!is_scale(j)) bytes[b + j] = 0xFF;
      }
      Problem p{t, n, k, bytes, {}};
      p.w = PackedWeight::pack(testing::borrow_rows(t, n, k, p.bytes));
      std::vector<float> x(m * k);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < k; ++j) x[i * k + j] = i % 2 == 0 ? 1.0f : -1.0f;
      set_isa_cap(Isa::Scalar);
      auto expect = run_matmul(p.w, x, m);
      set_isa_cap(Isa::Avx2);
      auto y = run_matmul(p.w, x, m);
      for (int64_t e = 0; e < m * n; ++e) {
        ASSERT_EQ(y[e], expect[e])
            << dtype_name(t) << " m " << m << " row " << e / n << " col " << e % n;
        ASSERT_EQ(expect[e], contract_reference(p, &x[(e / n) * k], e % n)) << dtype_name(t);
      }
    }
  }
}

// MXFP4's e8m0 scales reach below f32's normal range (2^-128 and 2^-127 at e = 0, 1): every tier
// forms them as the scalar reference does (the vector tiers from the byte's bits), for the decode
// tiles and every many-row form. Random e in 0..3 and around 1.0; inputs large enough that
// scale * d_b is a normal f32 (a scale formed as 0 or as its neighbour would change the result).
TEST(Matmul, Mxfp4SubnormalScalesMatchOnEveryTier) {
  testing::IsaCapGuard guard;
  std::mt19937 rng(17);
  const int64_t n = 19, k = 256;
  std::vector<uint8_t> bytes = random_rows(DType::MXFP4, n, k, rng);
  const uint8_t exps[] = {0, 1, 2, 3, 127, 128};
  for (size_t b = 0; b < bytes.size(); b += 17) bytes[b] = exps[rng() % 6];
  Problem p{DType::MXFP4, n, k, bytes, {}};
  p.w = PackedWeight::pack(testing::borrow_rows(DType::MXFP4, n, k, p.bytes));
  const int64_t m_max = 13;
  auto x = random_acts(m_max, k, rng);
  for (float& v : x) v *= 1e30f;
  for (Isa isa : testing::isa_tiers()) {
    set_isa_cap(isa);
    for (int64_t m : {1, 2, 5, 13}) {
      auto y = run_matmul(p.w, x, m, 2);
      for (int64_t e = 0; e < m * n; ++e) {
        const float want = contract_reference(p, &x[(e / n) * k], e % n);
        ASSERT_NE(want, 0.0f);
        ASSERT_EQ(y[e], want) << isa_name(isa) << " m " << m << " row " << e / n;
      }
    }
  }
}

// A row's result is bit-identical alone, inside batches of 8 and 32 with other rows, and with
// 1, 2 or 3 threads splitting the columns.
TEST(Matmul, BatchInvariant) {
  std::mt19937 rng(12);
  for (DType t : weight_dtypes()) {
    int64_t k = is_float(t) ? 48 : dtype_info(t).block_size * 2;
    Problem p = make_problem(t, 83, k, rng);
    auto x = random_acts(32, k, rng);
    auto batch32 = run_matmul(p.w, x, 32, 1);
    for (int nth : {1, 2, 3}) {
      EXPECT_EQ(run_matmul(p.w, x, 32, nth), batch32) << dtype_name(t) << " nth " << nth;
      for (int64_t i : {0, 5, 31}) {
        std::vector<float> one(x.begin() + i * k, x.begin() + (i + 1) * k);
        auto y1 = run_matmul(p.w, one, 1, nth);
        ASSERT_EQ(0, std::memcmp(y1.data(), &batch32[i * p.n], p.n * 4))
            << dtype_name(t) << " row " << i << " nth " << nth;
      }
      // Batch of 8 made of rows 24..31 preceded by a different mix.
      std::vector<float> eight(x.begin() + 24 * k, x.end());
      auto y8 = run_matmul(p.w, eight, 8, nth);
      ASSERT_EQ(0, std::memcmp(y8.data(), &batch32[24 * p.n], 8 * p.n * 4));
    }
  }
}

TEST(Matmul, ResidualMayAliasOutput) {
  std::mt19937 rng(13);
  Problem p = make_problem(DType::Q5_0, 40, 64, rng);
  auto x = random_acts(3, 64, rng);
  auto base = run_matmul(p.w, x, 3);
  auto res = random_acts(3, 40, rng);
  std::vector<float> y = res;
  std::vector<uint8_t> scratch(matmul_scratch_bytes(p.w, 3));
  run_threads(2, [&](const ExecContext& ctx) {
    matmul(p.w, x.data(), 3, y.data(), y.data(), scratch.data(), ctx);
  });
  for (size_t e = 0; e < y.size(); ++e) ASSERT_EQ(y[e], base[e] + res[e]);
}

// Merged weights (pack_concat, mixed dtypes) and split outputs give the same bits per column as
// the separate weights.
TEST(Matmul, SplitAndConcatMatchSeparateWeights) {
  std::mt19937 rng(14);
  const int64_t k = 256;
  DType types[] = {DType::Q5_0, DType::Q8_0, DType::Q4_K};
  int64_t ns[] = {40, 7, 24};
  std::vector<Problem> parts;
  std::vector<Tensor> ws;
  for (int i = 0; i < 3; ++i) parts.push_back(make_problem(types[i], ns[i], k, rng));
  for (auto& p : parts) ws.push_back(testing::borrow_rows(p.t, p.n, k, p.bytes));
  PackedWeight merged = PackedWeight::pack_concat(ws);
  // 1 row: the decode tiles; 2 and 6: the many-row tiles.
  for (const int64_t m : {1, 2, 6}) {
    auto x = random_acts(m, k, rng);
    for (int nth : {1, 2, 3}) {
      auto ym = run_matmul(merged, x, m, nth);
      std::vector<std::vector<float>> outs(3);
      std::vector<float*> out_ptrs;
      for (int i = 0; i < 3; ++i) {
        outs[i].assign(m * ns[i], -1.0f);
        out_ptrs.push_back(outs[i].data());
      }
      std::vector<uint8_t> scratch(matmul_scratch_bytes(merged, m));
      run_threads(nth, [&](const ExecContext& ctx) {
        matmul_split(merged, x.data(), m, out_ptrs.data(), ns, 3, scratch.data(), ctx);
      });
      int64_t col0 = 0;
      for (int s = 0; s < 3; ++s) {
        auto alone = run_matmul(parts[s].w, x, m);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t c = 0; c < ns[s]; ++c) {
            ASSERT_EQ(outs[s][i * ns[s] + c], alone[i * ns[s] + c]) << s;
            ASSERT_EQ(ym[i * merged.n() + col0 + c], alone[i * ns[s] + c]) << s;
          }
        col0 += ns[s];
      }
    }
    std::vector<float*> bad_outs(3, nullptr);
    std::vector<uint8_t> scratch(matmul_scratch_bytes(merged, m));
    int64_t wrong[] = {40, 7, 23};
    EXPECT_THROW(matmul_split(merged, x.data(), m, bad_outs.data(), wrong, 3, scratch.data(), {}),
                 Error);
  }
}

int32_t reference_argmax(const float* v, int64_t n) {
  float best = -std::numeric_limits<float>::infinity();
  int32_t at = -1;
  for (int64_t c = 0; c < n; ++c)
    if (v[c] > best || (at < 0 && v[c] == best)) {
      best = v[c];
      at = static_cast<int32_t>(c);
    }
  return at < 0 ? 0 : at;
}

// argmax without logits equals argmax over matmul's logits; ties (duplicated weight rows, one
// in each thread's share) resolve to the lowest column.
TEST(Matmul, ArgmaxMatchesLogits) {
  std::mt19937 rng(15);
  for (DType t : {DType::Q8_0, DType::Q6_K, DType::F16}) {
    const int64_t n = 200, k = is_float(t) ? 64 : dtype_info(t).block_size;
    auto bytes = random_rows(t, n, k, rng);
    size_t rb = dtype_bytes(t, k);
    // Rows 3, 150 and 199 copy row 120 -> a four-way tie for whichever row wins there.
    for (int64_t dup : {3, 150, 199}) std::memcpy(&bytes[dup * rb], &bytes[120 * rb], rb);
    PackedWeight w = PackedWeight::pack(testing::borrow_rows(t, n, k, bytes));
    const int64_t m = 9;
    auto x = random_acts(m, k, rng);
    // Make row 0's winner the duplicated row: x = that row's weights.
    std::vector<float> w120(k);
    dequantize_row(t, &bytes[120 * rb], w120.data(), k);
    for (int64_t j = 0; j < k; ++j) x[j] = w120[j] * 100.0f;
    auto logits = run_matmul(w, x, m);
    EXPECT_EQ(reference_argmax(logits.data(), n), 3) << dtype_name(t);
    // Threads take column groups from a shared queue, in whatever interleaving the run gives:
    // repeat, so that the tie's columns land on different threads.
    for (int nth : {1, 2, 3}) {
      for (int rep = 0; rep < (nth == 1 ? 1 : 20); ++rep) {
        std::vector<int32_t> ids(m, -7);
        std::vector<uint8_t> scratch(matmul_argmax_scratch_bytes(w, m, nth));
        run_threads(nth, [&](const ExecContext& ctx) {
          matmul_argmax(w, x.data(), m, ids.data(), scratch.data(), ctx);
        });
        for (int64_t i = 0; i < m; ++i)
          ASSERT_EQ(ids[i], reference_argmax(&logits[i * n], n))
              << dtype_name(t) << " row " << i << " nth " << nth;
      }
    }
  }
}

// matmul_argmax's epilogue skips the tile rows the AVX-512 scan reports as holding nothing above
// the running best: a value equal to it, NaN (in the tile or as the best) and -inf must not
// count, a greater value anywhere in the 16 columns (and +inf) must, for every row of a tile
// of up to 64.
TEST(Matmul, RowsAboveScanMatchesPlainCompares) {
  if (best_isa() < Isa::Avx512) GTEST_SKIP() << "no AVX-512 on this machine";
  std::mt19937 rng(23);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f, -0.0f, 1.5f, -1.5f, nan, inf, -inf};
  std::uniform_int_distribution<int> pick(0, 6), col(0, 15);
  for (int mt : {1, 4, 8, 63, 64}) {
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<float> tile(mt * 16), best(mt);
      for (int i = 0; i < mt; ++i) {
        best[i] = specials[pick(rng)];
        for (int c = 0; c < 16; ++c) tile[i * 16 + c] = rep % 2 ? -inf : specials[pick(rng)];
        if (rep % 4 == 1) tile[i * 16 + col(rng)] = specials[pick(rng)];  // one candidate
      }
      uint64_t expect = 0;
      for (int i = 0; i < mt; ++i)
        for (int c = 0; c < 16; ++c)
          if (tile[i * 16 + c] > best[i]) expect |= uint64_t{1} << i;
      ASSERT_EQ(rows_above_avx512(tile.data(), mt, best.data()), expect) << "mt " << mt;
    }
  }
}

// The activation quantizers of every tier agree bit for bit, also on zero, NaN, infinite,
// subnormal and huge inputs (a NaN or infinity must not make any tier read or write out of
// bounds, and all tiers must treat it the same way).
TEST(Matmul, ActivationQuantizationTiersAgree) {
  std::mt19937 rng(17);
  const int64_t k = 32 * 9;
  auto x = random_acts(1, k, rng);
  const float inf = std::numeric_limits<float>::infinity();
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.0f;                                   // zero block
  x[64 + 3] = std::numeric_limits<float>::quiet_NaN();                             // NaN
  x[96 + 5] = inf;                                                                 // +inf
  x[128 + 1] = -inf;                                                               // -inf
  for (int j = 0; j < 32; ++j) x[160 + j] = 1e-40f * (j - 16);                     // subnormal
  for (int j = 0; j < 32; ++j) x[192 + j] = 3e38f * ((j % 3) - 1);                 // huge
  for (int j = 0; j < 32; ++j) x[224 + j] = (j % 2 ? 0.5f : -0.5f) * (j % 5 + 1);  // ties
  // Written as row 1 of a block-major scratch of 2 rows; row 0's entries must stay untouched.
  constexpr int64_t kStride = 2;
  struct Out {
    std::vector<int8_t> q = std::vector<int8_t>(kStride * k, 99);
    std::vector<float> d = std::vector<float>(kStride * k / 32, 99.0f),
                       ds = std::vector<float>(kStride * k / 32, 99.0f);
    std::vector<int32_t> s16 = std::vector<int32_t>(kStride * k / 16, 99),
                         s32 = std::vector<int32_t>(kStride * k / 32, 99);
  };
  auto run = [&](QuantizeRowFn f) {
    Out o;
    f(x.data(), k, kStride, o.q.data() + 32, o.d.data() + 1, o.s16.data() + 1, o.s32.data() + 1,
      o.ds.data() + 1);
    return o;
  };
  Out ref = run(quantize_row_scalar);
  for (int64_t b = 0; b < k / 32; ++b) {
    for (int j = 0; j < 32; ++j) EXPECT_EQ(ref.q[b * kStride * 32 + j], 99);  // row 0 untouched
    EXPECT_EQ(ref.d[b * kStride], 99.0f);
    EXPECT_EQ(ref.s32[b * kStride], 99);
  }
  for (int j = 0; j < 32; ++j) EXPECT_EQ(ref.q[1 * kStride * 32 + 32 + j], 0);  // zero block
  EXPECT_EQ(ref.d[1 * kStride + 1], 0.0f);
  std::vector<QuantizeRowFn> tiers;
  if (best_isa() >= Isa::Avx2) tiers.push_back(quantize_row_avx2);
  if (best_isa() >= Isa::Avx512) tiers.push_back(quantize_row_avx512);
  for (QuantizeRowFn f : tiers) {
    Out o = run(f);
    EXPECT_EQ(o.q, ref.q);
    EXPECT_EQ(o.s16, ref.s16);
    EXPECT_EQ(o.s32, ref.s32);
    EXPECT_EQ(0, std::memcmp(o.d.data(), ref.d.data(), ref.d.size() * 4));
    EXPECT_EQ(0, std::memcmp(o.ds.data(), ref.ds.data(), ref.ds.size() * 4));
  }
}

TEST(Matmul, RejectsBadArguments) {
  std::mt19937 rng(16);
  Problem p = make_problem(DType::Q8_0, 16, 32, rng);
  std::vector<float> x(32), y(16);
  EXPECT_THROW(matmul(p.w, x.data(), 1, y.data(), nullptr, nullptr, {}), Error);  // no scratch
  EXPECT_THROW(matmul(p.w, nullptr, 1, y.data(), nullptr, x.data(), {}), Error);
  EXPECT_THROW(matmul(PackedWeight{}, x.data(), 1, y.data(), nullptr, x.data(), {}), Error);
  EXPECT_THROW(matmul_scratch_bytes(p.w, -1), Error);
}

}  // namespace
}  // namespace kiln::kernels
