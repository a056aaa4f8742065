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

KILN_INSTANTIATE_ISA_TESTS(RopeTest);

}  // namespace
}  // namespace kiln::kernels
