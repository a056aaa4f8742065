// matmul_gated (a gated MLP's gate/up GEMM with its activation in the epilogue) against what it
// replaces: matmul_split into gate and up, then gelu_mul / silu_mul, bit for bit.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/matmul.h"
#include "kiln/kernels/packed_weight.h"
#include "matmul_test_util.h"

namespace kiln::kernels {
namespace {

using testing::borrow_rows;
using testing::random_acts;
using testing::random_rows;
using testing::run_threads;

struct Unfused {
  std::vector<float> gate, up, h;
};

Unfused unfused(const PackedWeight& w, const std::vector<float>& x, int64_t m, int64_t n,
                GatedActivation act, int nth) {
  Unfused u;
  u.gate.assign(m * n, 0.0f);
  u.up.assign(m * n, 0.0f);
  u.h.assign(m * n, 0.0f);
  float* outs[] = {u.gate.data(), u.up.data()};
  const int64_t cols[] = {n, n};
  std::vector<uint8_t> scratch(matmul_scratch_bytes(w, m));
  run_threads(nth, [&](const ExecContext& ctx) {
    matmul_split(w, x.data(), m, outs, cols, 2, scratch.data(), ctx);
    ctx.sync();
    if (act == GatedActivation::Gelu) {
      gelu_mul(u.gate.data(), u.up.data(), u.h.data(), m * n, ctx);
    } else {
      silu_mul(u.gate.data(), u.up.data(), u.h.data(), m * n, ctx);
    }
  });
  return u;
}

std::vector<float> fused(const PackedWeight& w, const std::vector<float>& x, int64_t m, int64_t n,
                         GatedActivation act, int nth) {
  std::vector<float> h(m * n, -7.0f);
  std::vector<uint8_t> scratch(matmul_gated_scratch_bytes(w, m, nth));
  run_threads(nth, [&](const ExecContext& ctx) {
    matmul_gated(w, x.data(), m, act, h.data(), scratch.data(), ctx);
  });
  return h;
}

// Every weight type, on every ISA tier this machine has; row counts that take the decode tiles
// (1, 3, 8), the many-row ones (9, 33, 100: pairs of expanded groups on AVX-512, the chunked
// tiles on AVX2) and a 17-row batch; N = 40 (a partial last group in each half) and 64; K past
// the 64 KiB expansion buffer for two types (groups unpacked per tile); 1 to 3 threads, whose
// shared queue hands out gate/up pairs in any interleaving.
TEST(MatmulGated, EqualsSplitThenActivation) {
  testing::IsaCapGuard guard;
  std::mt19937 rng(31);
  for (Isa isa : testing::isa_tiers()) {
    set_isa_cap(isa);
    for (DType t : testing::weight_dtypes()) {
      const bool is_float = t == DType::F32 || t == DType::F16 || t == DType::BF16;
      const int64_t bs = is_float ? 32 : dtype_info(t).block_size;
      std::vector<int64_t> ks = {bs * (256 / bs + 1)};
      if (t == DType::Q4_K || t == DType::Q5_0) ks.push_back(8192);
      for (int64_t k : ks) {
        for (int64_t n : {40, 64}) {
          auto gate_bytes = random_rows(t, n, k, rng);
          auto up_bytes = random_rows(t, n, k, rng);
          PackedWeight w = PackedWeight::pack_concat(
              {borrow_rows(t, n, k, gate_bytes), borrow_rows(t, n, k, up_bytes)});
          for (int64_t m : {1, 3, 8, 9, 17, 33, 100}) {
            if (k == 8192 && m != 9 && m != 33) continue;  // the big K only where tiles differ
            auto x = random_acts(m, k, rng);
            for (GatedActivation act : {GatedActivation::Gelu, GatedActivation::Silu}) {
              const Unfused want = unfused(w, x, m, n, act, 2);
              for (int nth : {1, 2, 3}) {
                auto h = fused(w, x, m, n, act, nth);
                for (int64_t e = 0; e < m * n; ++e)
                  ASSERT_EQ(h[e], want.h[e])
                      << dtype_name(t) << " isa " << static_cast<int>(isa) << " k " << k << " n "
                      << n << " m " << m << " nth " << nth << " row " << e / n << " col " << e % n
                      << " act " << static_cast<int>(act);
              }
            }
          }
        }
      }
    }
  }
}

// A weight that is not a gate and an up half of one shape and dtype is refused.
TEST(MatmulGated, RejectsWeightsThatAreNotGateAndUp) {
  std::mt19937 rng(32);
  const int64_t k = 64;
  auto a = random_rows(DType::Q8_0, 32, k, rng);
  auto b = random_rows(DType::Q8_0, 48, k, rng);
  auto c = random_rows(DType::Q8_0, 32, k, rng);
  auto d = random_rows(DType::F16, 32, k, rng);
  const PackedWeight unequal = PackedWeight::pack_concat(
      {borrow_rows(DType::Q8_0, 32, k, a), borrow_rows(DType::Q8_0, 48, k, b)});
  const PackedWeight three = PackedWeight::pack_concat({borrow_rows(DType::Q8_0, 32, k, a),
                                                        borrow_rows(DType::Q8_0, 32, k, c),
                                                        borrow_rows(DType::Q8_0, 32, k, c)});
  const PackedWeight mixed = PackedWeight::pack_concat(
      {borrow_rows(DType::Q8_0, 32, k, a), borrow_rows(DType::F16, 32, k, d)});
  const PackedWeight single = PackedWeight::pack(borrow_rows(DType::Q8_0, 32, k, a));
  auto x = random_acts(2, k, rng);
  std::vector<float> h(2 * 48);
  for (const PackedWeight* w : {&unequal, &three, &mixed, &single}) {
    std::vector<uint8_t> scratch(matmul_gated_scratch_bytes(*w, 2, 1));
    EXPECT_THROW(matmul_gated(*w, x.data(), 2, GatedActivation::Silu, h.data(), scratch.data(), {}),
                 Error);
  }
}

}  // namespace
}  // namespace kiln::kernels
