#include "kiln/kernels/gemm_bf16.h"

#include <bit>
#include <cmath>

#include "kernel_test_util.h"
#include "kiln/base/half.h"
#include "kiln/kernels/elementwise.h"

namespace kiln::kernels {
namespace {

using testing::bits_equal;
using testing::random_floats;
using testing::run_group;

float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// y computed in float64 from the bf16-rounded operands, and sum |x_k w_k| per output (the scale
// of the f32 rounding error the kernels may add along the way).
struct Reference {
  std::vector<float> y;
  std::vector<double> magnitude;
};

Reference reference(const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& bias, int64_t m, int64_t n, int64_t k) {
  Reference r{std::vector<float>(m * n), std::vector<double>(m * n)};
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0, mag = 0;
      for (int64_t j = 0; j < k; ++j) {
        const double p = double(round_bf16(x[i * k + j])) * round_bf16(w[c * k + j]);
        acc += p;
        mag += std::fabs(p);
      }
      r.y[i * n + c] = static_cast<float>(acc + bias[c]);
      r.magnitude[i * n + c] = mag + std::fabs(bias[c]);
    }
  return r;
}

std::vector<float> run_gemm(const Bf16Weight& w, const std::vector<float>& x, int64_t m,
                            const std::vector<float>* bias, const std::vector<float>* residual,
                            int nth) {
  std::vector<float> y(m * w.n(), -7.0f);
  std::vector<uint8_t> scratch(gemm_bf16_scratch_bytes(w, m) + 64);
  void* s = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  run_group(nth, [&](const ExecContext& ctx) {
    gemm_bf16(w, x.data(), m, y.data(), bias != nullptr ? bias->data() : nullptr,
              residual != nullptr ? residual->data() : nullptr, s, ctx);
  });
  return y;
}

class GemmBf16Test : public testing::IsaTest {};

TEST_P(GemmBf16Test, MatchesFloat64OfRoundedOperands) {
  for (int64_t k : {1, 2, 3, 31, 32, 33, 64, 384}) {
    for (int64_t n : {1, 16, 31, 32, 33, 70}) {
      for (int64_t m : {1, 7, 8, 9, 20}) {
        const auto x = random_floats(m * k, 11 * k + m), w = random_floats(n * k, 13 * n + k);
        const auto bias = random_floats(n, 5 + n);
        const Bf16Weight packed = Bf16Weight::pack(w.data(), n, k);
        const std::vector<float> y = run_gemm(packed, x, m, &bias, nullptr, 1);
        const Reference ref = reference(x, w, bias, m, n, k);
        for (int64_t i = 0; i < m * n; ++i)
          ASSERT_LE(std::fabs(double(y[i]) - ref.y[i]), 1e-6 * ref.magnitude[i] + 1e-30)
              << "m " << m << " n " << n << " k " << k << " at " << i << ": " << y[i] << " vs "
              << ref.y[i];
      }
    }
  }
}

// Each output depends only on its row and column: any batch, thread split or tile gives the
// same bits; bias null is bias zero; a residual (aliasing y or not) is added last.
TEST_P(GemmBf16Test, BatchAndThreadInvariantWithBiasAndResidual) {
  const int64_t n = 100, k = 130, m = 27;
  const auto x = random_floats(m * k, 1), w = random_floats(n * k, 2);
  const auto bias = random_floats(n, 3), res = random_floats(m * n, 4);
  const Bf16Weight packed = Bf16Weight::pack(w.data(), n, k);
  const std::vector<float> full = run_gemm(packed, x, m, &bias, nullptr, 1);
  for (int nth : {2, 3, 8})
    EXPECT_TRUE(bits_equal(run_gemm(packed, x, m, &bias, nullptr, nth), full));
  for (int64_t i = 0; i < m; ++i) {
    const std::vector<float> row(x.begin() + i * k, x.begin() + (i + 1) * k);
    const std::vector<float> one = run_gemm(packed, row, 1, &bias, nullptr, 2);
    ASSERT_TRUE(
        bits_equal(one, std::vector<float>(full.begin() + i * n, full.begin() + (i + 1) * n)))
        << "row " << i;
  }
  const std::vector<float> zero_bias(n, 0.0f);
  EXPECT_TRUE(bits_equal(run_gemm(packed, x, m, nullptr, nullptr, 2),
                         run_gemm(packed, x, m, &zero_bias, nullptr, 2)));
  const std::vector<float> with_res = run_gemm(packed, x, m, &bias, &res, 2);
  for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(with_res[i], full[i] + res[i]) << i;
  // Residual aliasing the output, as the encoder's x = x + attn * W^T does.
  std::vector<float> y = res;
  std::vector<uint8_t> scratch(gemm_bf16_scratch_bytes(packed, m) + 64);
  void* s = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  run_group(2, [&](const ExecContext& ctx) {
    gemm_bf16(packed, x.data(), m, y.data(), bias.data(), y.data(), s, ctx);
  });
  EXPECT_TRUE(bits_equal(y, with_res));
}

// The emulating tiers (scalar, AVX2) are the same steps in software: equal bit for bit. The
// AVX512_BF16 instruction sums each pair odd element first with a rounding after each add (as
// Intel documents it, and as measured on Zen 4), so it matches them too on normal numbers; the
// check allows one rounding of slack per pair in case another CPU fuses the pair's sum.
TEST_P(GemmBf16Test, TiersAgreeWithTheScalarSteps) {
  const int64_t n = 64, k = 256, m = 11;
  const auto x = random_floats(m * k, 21, -50.0f, 50.0f), w = random_floats(n * k, 22);
  const auto bias = random_floats(n, 23);
  const Bf16Weight packed = Bf16Weight::pack(w.data(), n, k);
  const std::vector<float> mine = run_gemm(packed, x, m, &bias, nullptr, 2);
  set_isa_cap(Isa::Scalar);
  const std::vector<float> scalar = run_gemm(packed, x, m, &bias, nullptr, 2);
  set_isa_cap(GetParam());
  if (GetParam() != Isa::Avx512) {
    EXPECT_TRUE(bits_equal(mine, scalar));
    return;
  }
  const Reference ref = reference(x, w, bias, m, n, k);
  for (int64_t i = 0; i < m * n; ++i)
    ASSERT_LE(std::fabs(double(mine[i]) - scalar[i]), 1e-6 * ref.magnitude[i]) << i;
}

// A fused activation equals the unfused GEMM followed by elementwise.h's kernel, bit for bit.
TEST_P(GemmBf16Test, FusedGeluEqualsGemmThenGelu) {
  const int64_t n = 77, k = 48, m = 13;
  const auto x = random_floats(m * k, 31), w = random_floats(n * k, 32, -0.5f, 0.5f);
  const auto bias = random_floats(n, 33);
  const Bf16Weight packed = Bf16Weight::pack(w.data(), n, k);
  for (Bf16Activation act : {Bf16Activation::kGeluErf, Bf16Activation::kGeluTanh}) {
    std::vector<float> want = run_gemm(packed, x, m, &bias, nullptr, 1);
    if (act == Bf16Activation::kGeluErf)
      gelu_erf(want.data(), want.data(), m * n, ExecContext{});
    else
      gelu_tanh(want.data(), want.data(), m * n, ExecContext{});
    std::vector<float> got(m * n);
    std::vector<uint8_t> scratch(gemm_bf16_scratch_bytes(packed, m));
    run_group(2, [&](const ExecContext& ctx) {
      gemm_bf16(packed, x.data(), m, got.data(), bias.data(), nullptr, scratch.data(), ctx, act);
    });
    EXPECT_TRUE(bits_equal(got, want));
    EXPECT_FALSE(bits_equal(got, run_gemm(packed, x, m, &bias, nullptr, 1)));
  }
}

TEST_P(GemmBf16Test, PackRoundsToNearestEven) {
  // Ties both ways, a NaN, infinities, and values that carry into the exponent.
  std::vector<float> w;
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x3f7fffffu, 0x7fc00001u,
                        0x7f800000u, 0xff800000u, 0x477fffffu, 0xbf808001u})
    w.push_back(std::bit_cast<float>(bits));
  const int64_t k = static_cast<int64_t>(w.size());
  const Bf16Weight packed = Bf16Weight::pack(w.data(), 1, k);
  for (int64_t j = 0; j < k; ++j) {
    const float want = round_bf16(w[j]);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(packed.at(0, j)));
    else
      EXPECT_EQ(packed.at(0, j), want) << j;
  }
  // Activations go through each tier's pack_row: column j of a one-hot weight picks x_j (finite
  // values only: inf * 0 would make every sum NaN).
  std::erase_if(w, [](float v) { return !std::isfinite(v); });
  for (int i = 0; i < 40; ++i) w.push_back(std::ldexp(1.0f + i / 256.0f + 1.0f / 512, i - 20));
  const int64_t kx = static_cast<int64_t>(w.size());
  std::vector<float> eye(kx * kx, 0.0f);
  for (int64_t j = 0; j < kx; ++j) eye[j * kx + j] = 1.0f;
  const Bf16Weight identity = Bf16Weight::pack(eye.data(), kx, kx);
  const std::vector<float> y = run_gemm(identity, w, 1, nullptr, nullptr, 1);
  for (int64_t j = 0; j < kx; ++j) EXPECT_EQ(y[j], round_bf16(w[j])) << j;
}

KILN_INSTANTIATE_ISA_TESTS(GemmBf16Test);

}  // namespace
}  // namespace kiln::kernels
