#include "kiln/kernels/rope.h"

#include <cmath>

#include "kernel_test_util.h"
#include "kiln/base/error.h"

namespace kiln::kernels {
namespace {

using testing::all_close;
using testing::bits_equal;
using testing::random_floats;
using testing::run_group;

// The float64 reference: angle = pos * inv_freq[i] in double (inv_freq as the float values
// rope_inv_freq returns), rotation in double. Tolerance 1e-6 absolute + 1e-6 relative for
// inputs of magnitude ~1 (cos/sin rounded to float, one float rotation).
std::vector<float> rope_f64(const std::vector<float>& x, const std::vector<int32_t>& pos,
                            const std::vector<float>& inv, int64_t rows, int heads, int hd,
                            bool neox) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd / 2; ++i) {
        double a = double(pos[r]) * double(inv[i]);
        int i0 = neox ? i : 2 * i, i1 = neox ? i + hd / 2 : 2 * i + 1;
        int64_t base = (r * heads + h) * hd;
        double x0 = x[base + i0], x1 = x[base + i1];
        out[base + i0] = float(x0 * std::cos(a) - x1 * std::sin(a));
        out[base + i1] = float(x1 * std::cos(a) + x0 * std::sin(a));
      }
  return out;
}

class RopeTest : public testing::IsaTest {};

TEST(RopeInvFreq, MatchesPowFormula) {
  auto inv = rope_inv_freq(256, 1e6);
  ASSERT_EQ(inv.size(), 128u);
  EXPECT_EQ(inv[0], 1.0f);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(inv[i], float(std::pow(1e6, -2.0 * i / 256)));
  EXPECT_THROW(rope_inv_freq(7, 1e4), Error);
  EXPECT_THROW(rope_inv_freq(64, 0.5), Error);
}

TEST_P(RopeTest, MatchesFloat64ReferenceBothLayouts) {
  for (int hd : {2, 4, 6, 8, 14, 16, 30, 32, 64, 80, 128, 256}) {
    for (bool neox : {true, false}) {
      const int heads = 3;
      const int64_t rows = 9;
      auto inv = rope_inv_freq(hd, 10000.0);
      auto x = random_floats(rows * heads * hd, hd + neox);
      std::vector<int32_t> pos = {0, 1, 2, 17, 511, 4095, 30000, 32767, 131071};
      std::vector<float> out(x.size());
      rope(x.data(), pos.data(), inv.data(), out.data(), rows, heads, hd, neox, ExecContext{});
      ASSERT_TRUE(all_close(out, rope_f64(x, pos, inv, rows, heads, hd, neox), 1e-6, 1e-6))
          << "hd " << hd << " neox " << neox;
    }
  }
}

TEST_P(RopeTest, InPlaceAndThreadsGiveIdenticalResults) {
  const int hd = 256, heads = 4;
  const int64_t rows = 33;
  auto inv = rope_inv_freq(hd, 1e6);
  auto x = random_floats(rows * heads * hd, 4);
  std::vector<int32_t> pos(rows);
  for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(r * 97);
  std::vector<float> ref(x.size());
  rope(x.data(), pos.data(), inv.data(), ref.data(), rows, heads, hd, true, ExecContext{});
  for (int nth : {1, 2, 3}) {
    std::vector<float> y = x;
    run_group(nth, [&](const ExecContext& ctx) {
      rope(y.data(), pos.data(), inv.data(), y.data(), rows, heads, hd, true, ctx);
    });
    EXPECT_TRUE(bits_equal(y, ref)) << nth;
  }
}

TEST_P(RopeTest, BadHeadDimThrows) {
  std::vector<float> x(8), inv(4);
  std::vector<int32_t> pos(1);
  EXPECT_THROW(rope(x.data(), pos.data(), inv.data(), x.data(), 1, 1, 7, true, ExecContext{}),
               Error);
}

// The reference with partial rotary and frequency factors: frequency i is the float value
// the kernels define, float(double(inv[i]) / factors[i]) (inv from rope_inv_freq(n_rot, ...)),
// the angle and rotation in double; dimensions n_rot..hd-1 of every head are copied.
std::vector<float> rope_f64_partial(const std::vector<float>& x, const std::vector<int32_t>& pos,
                                    const std::vector<float>& inv,
                                    const std::vector<float>& factors, int64_t rows, int heads,
                                    int hd, int n_rot, bool neox) {
  std::vector<float> out = x;
  const int half = n_rot / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        float f = inv[i];
        if (!factors.empty()) f = float(double(inv[i]) / double(factors[i]));
        double a = double(pos[r]) * double(f);
        int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        int64_t base = (r * heads + h) * hd;
        double x0 = x[base + i0], x1 = x[base + i1];
        out[base + i0] = float(x0 * std::cos(a) - x1 * std::sin(a));
        out[base + i1] = float(x1 * std::cos(a) + x0 * std::sin(a));
      }
  return out;
}

// Llama 3-like factors: 1 for the fastest frequencies, rising to ~8 (and one odd value).
std::vector<float> llama3_factors(int n) {
  std::vector<float> f(n);
  for (int i = 0; i < n; ++i) f[i] = 1.0f + 7.0f * float(i * i) / float(n * n);
  if (n > 2) f[n / 2] = 3.3f;
  return f;
}

TEST(RopeFrequencies, DivideByTheFactorsInDoubleRoundingOnce) {
  auto inv = rope_inv_freq(96, 500000.0);
  auto ff = llama3_factors(48);
  float scratch[kRopeMaxHeadDim / 2];
  const float* f = rope_frequencies(RopeSpec{128, 96, false, inv.data(), ff.data()}, scratch);
  for (int i = 0; i < 48; ++i) EXPECT_EQ(f[i], float(double(inv[i]) / double(ff[i]))) << i;
  EXPECT_EQ(rope_frequencies(RopeSpec{128, 96, false, inv.data(), nullptr}, scratch), inv.data());
}

TEST_P(RopeTest, PartialRotaryAndFactorsMatchFloat64Reference) {
  struct Case {
    int hd, n_rot;
  };
  // n_rot of every parity of n_rot/2 against the vector widths (8, 16 floats), head_dim both a
  // multiple of them and not; 0.75 * 128 = 96 and 0.75 * 96 = 72 are Phi-4-mini-like.
  for (Case c :
       {Case{8, 2}, Case{8, 6}, Case{14, 6}, Case{14, 10}, Case{30, 22}, Case{32, 24}, Case{64, 16},
        Case{80, 60}, Case{96, 72}, Case{128, 96}, Case{128, 126}, Case{128, 128}, Case{256, 64}}) {
    for (bool neox : {true, false}) {
      for (bool factors : {false, true}) {
        for (int heads : {1, 3, 5}) {
          const int64_t rows = 9;
          auto inv = rope_inv_freq(c.n_rot, 500000.0);
          auto ff = factors ? llama3_factors(c.n_rot / 2) : std::vector<float>{};
          auto x = random_floats(rows * heads * c.hd, c.hd + c.n_rot + neox);
          std::vector<int32_t> pos = {0, 1, 2, 17, 511, 4095, 30000, 32767, 131071};
          const RopeSpec spec{c.hd, c.n_rot, neox, inv.data(), factors ? ff.data() : nullptr};
          std::vector<float> out(x.size(), -7.0f);  // garbage the kernel must overwrite
          rope(x.data(), pos.data(), spec, out.data(), rows, heads, ExecContext{});
          auto want = rope_f64_partial(x, pos, inv, ff, rows, heads, c.hd, c.n_rot, neox);
          ASSERT_TRUE(all_close(out, want, 1e-6, 1e-6))
              << "hd " << c.hd << " n_rot " << c.n_rot << " neox " << neox << " factors " << factors
              << " heads " << heads;
          for (size_t i = 0; i < x.size(); ++i)
            if (static_cast<int>(i % c.hd) >= c.n_rot) {
              ASSERT_EQ(out[i], x[i]) << i;
            }
          std::vector<float> y = x;  // in place gives the same bits
          rope(y.data(), pos.data(), spec, y.data(), rows, heads, ExecContext{});
          ASSERT_TRUE(bits_equal(y, out)) << "in place, hd " << c.hd << " n_rot " << c.n_rot;
        }
      }
    }
  }
}

TEST_P(RopeTest, FullRotaryAndUnitFactorsAreBitIdenticalToThePlainCall) {
  const int hd = 80, heads = 3;
  const int64_t rows = 7;
  auto inv = rope_inv_freq(hd, 10000.0);
  auto x = random_floats(rows * heads * hd, 12);
  std::vector<int32_t> pos = {0, 5, 99, 1000, 4097, 30001, 65535};
  std::vector<float> ones(hd / 2, 1.0f);
  for (bool neox : {true, false}) {
    std::vector<float> plain(x.size()), spec_out(x.size()), unit(x.size());
    rope(x.data(), pos.data(), inv.data(), plain.data(), rows, heads, hd, neox, ExecContext{});
    rope(x.data(), pos.data(), RopeSpec{hd, hd, neox, inv.data(), nullptr}, spec_out.data(), rows,
         heads, ExecContext{});
    rope(x.data(), pos.data(), RopeSpec{hd, 0, neox, inv.data(), ones.data()}, unit.data(), rows,
         heads, ExecContext{});
    EXPECT_TRUE(bits_equal(spec_out, plain)) << neox;
    EXPECT_TRUE(bits_equal(unit, plain)) << neox;
  }
}

TEST_P(RopeTest, PartialRotaryThreadsGiveIdenticalResults) {
  const int hd = 96, n_rot = 72, heads = 5;
  const int64_t rows = 33;
  auto inv = rope_inv_freq(n_rot, 1e6);
  auto ff = llama3_factors(n_rot / 2);
  auto x = random_floats(rows * heads * hd, 5);
  std::vector<int32_t> pos(rows);
  for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(r * 997);
  for (bool neox : {true, false}) {
    const RopeSpec spec{hd, n_rot, neox, inv.data(), ff.data()};
    std::vector<float> ref(x.size());
    rope(x.data(), pos.data(), spec, ref.data(), rows, heads, ExecContext{});
    for (int nth : {2, 3}) {
      std::vector<float> y = x;
      run_group(nth, [&](const ExecContext& ctx) {
        rope(y.data(), pos.data(), spec, y.data(), rows, heads, ctx);
      });
      EXPECT_TRUE(bits_equal(y, ref)) << nth << " neox " << neox;
    }
  }
}

TEST_P(RopeTest, BadRotaryDimsOrFactorsThrow) {
  std::vector<float> x(16), inv = rope_inv_freq(8, 1e4), ff(4, 1.0f);
  std::vector<int32_t> pos(1);
  auto run = [&](int hd, int n_rot, const float* factors) {
    rope(x.data(), pos.data(), RopeSpec{hd, n_rot, true, inv.data(), factors}, x.data(), 1, 1,
         ExecContext{});
  };
  EXPECT_NO_THROW(run(16, 8, ff.data()));
  EXPECT_THROW(run(16, 7, nullptr), Error);   // odd
  EXPECT_THROW(run(8, 10, nullptr), Error);   // more than head_dim
  EXPECT_THROW(run(16, -2, nullptr), Error);  // negative
  ff[2] = 0.0f;
  EXPECT_THROW(run(16, 8, ff.data()), Error);
  ff[2] = std::nanf("");
  EXPECT_THROW(run(16, 8, ff.data()), Error);
}

KILN_INSTANTIATE_ISA_TESTS(RopeTest);

}  // namespace
}  // namespace kiln::kernels
