#include "kiln/base/half.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kiln/base/cpu_features.h"

namespace kiln {
namespace {

// Every f16 bit pattern survives f16 -> f32 -> f16 (NaNs stay NaN).
TEST(Half, RoundTripsEveryF16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
}

// The scalar conversion rounds exactly like the F16C instruction on many values.
__attribute__((target("f16c"))) static uint16_t hw_f32_to_f16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(Half, MatchesF16cRounding) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C on this CPU";
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    float f;
    uint32_t bits = state;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    uint16_t hw = hw_f32_to_f16(f);
    EXPECT_EQ(f32_to_f16(f), hw) << f;
  }
}

}  // namespace
}  // namespace kiln
