// kiln's Q8_0/Q4_0 quantizer (for --quantize) writes the blocks the gguf package's quantizer
// writes for the same floats (fixture tests/fixtures/make_quant_blocks.py), and its rows
// dequantize to within half a step of the input (a step, on Q4_0's clamped side).
#include "kiln/kernels/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/dequant.h"

namespace kiln::kernels {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing fixture " << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(Quantize, SameBlocksAsGgufQuantizer) {
  const char* dir = std::getenv("KILN_TESTDATA");
  if (dir == nullptr) GTEST_SKIP() << "KILN_TESTDATA not set (run through ctest)";
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    const std::string name(dtype_name(t));
    SCOPED_TRACE(name);
    const auto src_bytes = read_bytes(std::string(dir) + "/quant_" + name + ".source.f32");
    const auto ref = read_bytes(std::string(dir) + "/quant_" + name + ".bin");
    std::vector<float> src(src_bytes.size() / 4);
    std::memcpy(src.data(), src_bytes.data(), src.size() * 4);
    // The fixture's first half is gguf's quantization of the first half of the floats.
    const int64_t n = static_cast<int64_t>(src.size()) / 2 / 32 * 32;
    std::vector<uint8_t> got(dtype_bytes(t, n));
    quantize_row(t, src.data(), got.data(), n);
    ASSERT_LE(got.size(), ref.size());
    size_t differing = 0;
    for (size_t i = 0; i < got.size(); ++i) differing += got[i] != ref[i];
    EXPECT_EQ(differing, 0u) << "of " << got.size() << " bytes";
  }
}

TEST(Quantize, RoundTripWithinHalfAStepOrTheClamp) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(256);
  for (float& v : x) v = normal(rng);
  x[5] = 0.0f;
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    std::vector<uint8_t> q(dtype_bytes(t, 256));
    quantize_row(t, x.data(), q.data(), 256);
    std::vector<float> back(256);
    dequantize_row(t, q.data(), back.data(), 256);
    for (int b = 0; b < 8; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[32 * b + j]));
      const float step = amax / (t == DType::Q8_0 ? 127.0f : 8.0f);
      // Q4_0's codes reach -8 steps on the largest element's side but only +7 on the other,
      // so values there may be clamped by up to a whole step.
      const float bound = t == DType::Q8_0 ? 0.5f * step : step;
      for (int j = 0; j < 32; ++j) {
        EXPECT_NEAR(back[32 * b + j], x[32 * b + j], bound + 1e-3f * amax + 1e-7f)
            << dtype_name(t) << " element " << 32 * b + j;
      }
    }
  }
}

TEST(Quantize, RefusesOtherTypesAndPartialBlocks) {
  std::vector<float> x(32, 1.0f);
  std::vector<uint8_t> q(256);
  EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), q.data(), 32), Error);
  EXPECT_THROW(quantize_row(DType::Q8_0, x.data(), q.data(), 31), Error);
}

}  // namespace
}  // namespace kiln::kernels
