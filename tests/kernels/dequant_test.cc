#include "kiln/kernels/dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "kiln/base/error.h"

namespace kiln::kernels {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing fixture " << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0)) return a == b ? 0 : INT64_MAX;  // +0 vs -0 are equal
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

// Every block type decodes to what the gguf package's independent numpy implementation gives
// (fixture tests/fixtures/make_quant_blocks.py: gguf-quantized floats and random codes).
TEST(Dequant, MatchesGgufReferenceForEveryType) {
  const char* dir = std::getenv("KILN_TESTDATA");
  if (dir == nullptr) GTEST_SKIP() << "KILN_TESTDATA not set (run through ctest)";
  std::ifstream list(std::string(dir) + "/quant_blocks.txt");
  ASSERT_TRUE(list.good()) << "missing " << dir << "/quant_blocks.txt";
  std::string name;
  int64_t n;
  int types = 0;
  while (list >> name >> n) {
    ++types;
    auto dt = dtype_from_name(name);
    ASSERT_TRUE(dt.has_value()) << name;
    auto raw = read_file(std::string(dir) + "/quant_" + name + ".bin");
    auto ref_bytes = read_file(std::string(dir) + "/quant_" + name + ".f32");
    ASSERT_EQ(raw.size(), dtype_bytes(*dt, n)) << name;
    ASSERT_EQ(ref_bytes.size(), static_cast<size_t>(n) * 4) << name;
    std::vector<float> ref(n), got(n);
    std::memcpy(ref.data(), ref_bytes.data(), ref_bytes.size());
    dequantize_row(*dt, raw.data(), got.data(), n);
    int64_t exact = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_LE(ulp_distance(got[i], ref[i]), 1)
          << name << " element " << i << ": " << got[i] << " vs gguf " << ref[i];
      exact += got[i] == ref[i];
    }
    // Same float operations as ggml, so nearly everything should be bit-exact.
    EXPECT_EQ(exact, n) << name;
  }
  EXPECT_EQ(types, 16);
}

// Hand-built blocks with known values, independent of any fixture.
TEST(Dequant, Q8_0KnownBlock) {
  BlockQ8_0 b{};
  b.d = 0x3800;  // f16 0.5
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j - 16);
  b.qs[0] = -128;
  float out[32];
  dequantize_row(DType::Q8_0, &b, out, 32);
  EXPECT_EQ(out[0], -64.0f);
  for (int j = 1; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16)) << j;
}

TEST(Dequant, Q5_0KnownBlock) {
  BlockQ5_0 b{};
  b.d = 0x3c00;    // 1.0
  b.qs[3] = 0x5A;  // element 3 low nibble 0xA, element 19 high nibble 0x5
  uint32_t qh = (1u << 3) | (1u << 19) | (1u << 31);
  std::memcpy(b.qh, &qh, 4);
  float out[32];
  dequantize_row(DType::Q5_0, &b, out, 32);
  EXPECT_EQ(out[3], static_cast<float>(0x1A - 16));
  EXPECT_EQ(out[19], static_cast<float>(0x15 - 16));
  EXPECT_EQ(out[31], 0.0f);   // code 16 -> 0
  EXPECT_EQ(out[0], -16.0f);  // code 0
}

// w = d * q + m: the minimum is added (kiln keeps it as the minimum -m).
TEST(Dequant, Q4_1KnownBlock) {
  BlockQ4_1 b{};
  b.d = 0x3800;    // 0.5
  b.m = 0xC000;    // -2.0
  b.qs[5] = 0x3C;  // element 5 code 12, element 21 code 3
  float out[32];
  dequantize_row(DType::Q4_1, &b, out, 32);
  EXPECT_EQ(out[5], 0.5f * 12 - 2.0f);
  EXPECT_EQ(out[21], 0.5f * 3 - 2.0f);
  EXPECT_EQ(out[0], -2.0f);
}

// MXFP4's e8m0 scale is 2^(e - 128) over the whole byte range, subnormal at e < 2 (an f16 could
// hold neither end): kiln keeps the byte and forms the f32 as ggml does.
TEST(Dequant, Mxfp4ScalesOverTheWholeByteRange) {
  BlockMXFP4 b{};
  b.qs[0] = 0x72;  // element 0: index 2 (value 2), element 16: index 7 (value 12)
  b.qs[1] = 0xF9;  // element 1: index 9 (-1), element 17: index 15 (-12)
  float out[32];
  for (int e : {0, 1, 2, 127, 128, 254, 255}) {
    b.e = static_cast<uint8_t>(e);
    dequantize_row(DType::MXFP4, &b, out, 32);
    const float scale = std::ldexp(1.0f, e - 128);
    EXPECT_EQ(out[0], 2 * scale) << e;
    EXPECT_EQ(out[16], 12 * scale) << e;  // infinite at e = 255, as in ggml
    EXPECT_EQ(out[1], -scale) << e;
    EXPECT_EQ(out[17], -12 * scale) << e;
    EXPECT_EQ(out[2], 0.0f) << e;
  }
}

TEST(Dequant, Q4_KScaleUnpacking) {
  BlockQ4_K b{};
  b.d = 0x3c00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  // Sub-block 5: sc = low nibble of scales[9] | top bits of scales[1] << 4;
  //              m  = high nibble of scales[9] | top bits of scales[5] << 4.
  b.scales[9] = 0x73;
  b.scales[1] = 0x80;       // top bits 10 -> sc += 32
  b.scales[5] = 0x40;       // top bits 01 -> m += 16
  b.qs[2 * 32 + 7] = 0x90;  // sub-block 5 = chunk 2, high nibbles: element 160 + 7 has code 9
  float out[256];
  dequantize_row(DType::Q4_K, &b, out, 256);
  float sc = 3 + 32, m = 7 + 16;
  EXPECT_EQ(out[160 + 7], sc * 9 - 0.5f * m);
  EXPECT_EQ(out[160 + 8], -0.5f * m);
}

TEST(Dequant, RejectsTypesWithoutStorage) {
  float out[32];
  uint8_t raw[64] = {};
  EXPECT_THROW(dequantize_row(DType::Token, raw, out, 1), Error);
  EXPECT_THROW(dequantize_row(DType::I32, raw, out, 1), Error);
  EXPECT_THROW(dequantize_row(DType::Q8_0, raw, out, 31), Error);
}

}  // namespace
}  // namespace kiln::kernels
