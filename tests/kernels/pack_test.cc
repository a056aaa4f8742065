#include <gtest/gtest.h>

#include <optional>

#include "kiln/base/bump_arena.h"
#include "kiln/base/error.h"
#include "kiln/base/thread_pool.h"
#include "kiln/kernels/dequant.h"
#include "kiln/kernels/packed_weight.h"
#include "matmul_test_util.h"

namespace kiln::kernels {
namespace {

using testing::random_rows;
using testing::weight_dtypes;

int64_t test_k(DType t, int mult) {
  return dtype_info(t).block_size == 1 ? 7 * mult : dtype_info(t).block_size * mult;
}

// Repacking loses nothing: every packed row dequantizes to exactly the source row, for every
// dtype, with N not a multiple of the 16-row group.
TEST(PackedWeight, DequantizesToTheSourceExactly) {
  std::mt19937 rng(1);
  for (DType t : weight_dtypes()) {
    for (int mult : {1, 3}) {
      const int64_t n = 37, k = test_k(t, mult);
      auto bytes = random_rows(t, n, k, rng);
      PackedWeight p = PackedWeight::pack(testing::borrow_rows(t, n, k, bytes));
      EXPECT_EQ(p.n(), n);
      EXPECT_EQ(p.k(), k);
      auto ref = testing::dequantize_all(t, n, k, bytes);
      std::vector<float> row(k);
      for (int64_t r = 0; r < n; ++r) {
        p.dequantize_row(r, row.data());
        ASSERT_EQ(std::memcmp(row.data(), &ref[r * k], k * 4), 0)
            << dtype_name(t) << " row " << r << " k " << k;
      }
    }
  }
}

// The packed size is the GGUF size (f16-scale types), or for K-quants, which keep each scale's
// two factors as the file does, the file's bits plus one f16 d (and dmin) per 16 x 256 weights
// instead of per 256 (Q4_K: 4.625 bits per weight against the file's 4.5; a group is padded to 64
// bytes); N is padded to whole 16-row groups.
TEST(PackedWeight, BytesAndFormat) {
  std::mt19937 rng(2);
  const int64_t n = 32;
  struct Case {
    DType t;
    int64_t k;
    size_t bytes;
    const char* format;
  } cases[] = {
      {DType::Q8_0, 640, 32 * 640 / 32 * 34, "q8_0x16/vnni"},
      {DType::Q5_0, 640, 32 * 640 / 32 * 22, "q5_0x16/vnni"},
      {DType::Q4_0, 64, 32 * 64 / 32 * 18, "q4_0x16/vnni"},
      {DType::Q4_K, 256, 32 * 256 * 37 / 64, "q4_kx16/vnni"},  // 4.625 bits
      {DType::Q4_K, 2048, 32 * 2048 * 37 / 64, "q4_kx16/vnni"},
      {DType::Q5_K, 256, 32 * 256 * 45 / 64, "q5_kx16/vnni"},      // 5.625 bits
      {DType::Q6_K, 2048, 32 * 2048 * 105 / 128, "q6_kx16/vnni"},  // 6.5625 bits, as the file
      {DType::Q6_K, 256, 2 * 3392, "q6_kx16/vnni"},          // 3360 bytes a group, padded to 64
      {DType::Q4_1, 64, 32 * 64 / 32 * 20, "q4_1x16/vnni"},  // f16 scale and minimum: 5 bits
      // 3-bit codes and int8 sc - 32 (the file's are 6 bits): 3.5625 bits against 3.4375
      {DType::Q3_K, 2048, 32 * 2048 * 57 / 128, "q3_kx16/vnni"},
      {DType::Q3_K, 256, 2 * 1856, "q3_kx16/vnni"},  // 1824 bytes a group, padded to 64
      // 2-bit codes, sc and m sharing a byte: 2.625 bits, as the file
      {DType::Q2_K, 2048, 32 * 2048 * 21 / 64, "q2_kx16/vnni"},
      {DType::Q2_K, 256, 32 * 256 * 21 / 64, "q2_kx16/vnni"},
      {DType::IQ4_XS, 2048, 32 * 2048 * 69 / 128, "iq4_xsx16/vnni"},  // 4.3125 bits
      {DType::IQ4_NL, 64, 32 * 64 / 32 * 18, "iq4_nlx16/vnni"},       // as the file
      {DType::Q5_1, 64, 32 * 64 / 32 * 24, "q5_1x16/vnni"},           // as the file
      {DType::MXFP4, 64, 32 * 64 / 32 * 17, "mxfp4x16/vnni"},         // e8m0 bytes: as the file
      {DType::BF16, 10, 32 * 10 * 2, "bf16x16/fma"},
  };
  for (const Case& c : cases) {
    auto bytes = random_rows(c.t, n, c.k, rng);
    PackedWeight p = PackedWeight::pack(testing::borrow_rows(c.t, n, c.k, bytes));
    EXPECT_EQ(p.bytes(), c.bytes) << dtype_name(c.t);
    EXPECT_EQ(p.format(), c.format);
  }
}

TEST(PackedWeight, ConcatKeepsEveryRow) {
  std::mt19937 rng(3);
  const int64_t k = 64;
  DType types[] = {DType::Q5_0, DType::Q8_0, DType::F16};
  int64_t ns[] = {20, 5, 16};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<Tensor> ws;
  for (int i = 0; i < 3; ++i) bytes.push_back(random_rows(types[i], ns[i], k, rng));
  for (int i = 0; i < 3; ++i) ws.push_back(testing::borrow_rows(types[i], ns[i], k, bytes[i]));
  PackedWeight p = PackedWeight::pack_concat(ws);
  EXPECT_EQ(p.n(), 41);
  EXPECT_EQ(p.format(), "q5_0x16/vnni+q8_0x16/vnni+f16x16/fma");
  std::vector<float> row(k);
  int64_t at = 0;
  for (int i = 0; i < 3; ++i) {
    auto ref = testing::dequantize_all(types[i], ns[i], k, bytes[i]);
    for (int64_t r = 0; r < ns[i]; ++r, ++at) {
      p.dequantize_row(at, row.data());
      ASSERT_EQ(std::memcmp(row.data(), &ref[r * k], k * 4), 0) << i << " " << r;
    }
  }
  EXPECT_THROW(p.dequantize_row(41, row.data()), Error);
}

// The weight store serves separate weights as views of a merged weight's segments: each view
// must hold exactly the bytes (and layout) packing that weight alone gives, on a 64-byte-
// aligned address, and keep the merged buffer alive.
TEST(PackedWeight, SegmentViewsEqualTheSeparateWeights) {
  std::mt19937 rng(4);
  const int64_t k = 96;  // Q4_0 groups of 3 records: 864 bytes, not a multiple of 64
  DType types[] = {DType::Q4_0, DType::Q8_0, DType::F16, DType::Q4_0};
  int64_t ns[] = {12, 5, 16, 33};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<Tensor> ws;
  for (int i = 0; i < 4; ++i) bytes.push_back(random_rows(types[i], ns[i], k, rng));
  for (int i = 0; i < 4; ++i) ws.push_back(testing::borrow_rows(types[i], ns[i], k, bytes[i]));
  std::optional<PackedWeight> merged = PackedWeight::pack_concat(ws);
  std::vector<PackedWeight> views;
  for (size_t i = 0; i < 4; ++i) views.push_back(merged->segment_view(i, 1));
  PackedWeight tail = merged->segment_view(2, 2);
  merged.reset();  // the views keep the bytes alive
  for (int i = 0; i < 4; ++i) {
    PackedWeight alone = PackedWeight::pack(ws[i]);
    ASSERT_EQ(views[i].bytes(), alone.bytes()) << i;
    EXPECT_EQ(views[i].n(), alone.n());
    EXPECT_EQ(views[i].segments()[0].offset, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(views[i].data()) % 64, 0u) << i;
    EXPECT_EQ(std::memcmp(views[i].data(), alone.data(), alone.bytes()), 0) << i;
  }
  PackedWeight pair = PackedWeight::pack_concat({ws[2], ws[3]});
  ASSERT_EQ(tail.bytes(), pair.bytes());
  EXPECT_EQ(tail.format(), pair.format());
  EXPECT_EQ(std::memcmp(tail.data(), pair.data(), pair.bytes()), 0);
  EXPECT_EQ(pair.serialize(), tail.serialize());  // same header: same segments, offsets, sizes
  EXPECT_THROW(tail.segment_view(1, 2), Error);
}

TEST(PackedWeight, AllocatorPlacesTheBytesAndIsHeldAlive) {
  std::mt19937 rng(5);
  auto bytes = random_rows(DType::Q5_0, 20, 64, rng);
  Tensor w = testing::borrow_rows(DType::Q5_0, 20, 64, bytes);
  PackedWeight own = PackedWeight::pack(w);
  BumpArena arena(1 << 16);
  auto first = arena.allocate(64);
  PackedWeight placed = PackedWeight::pack(w, [&](size_t n) { return arena.allocate(n); });
  EXPECT_EQ(placed.data(), first.get() + 64);  // right behind the first piece
  ASSERT_EQ(placed.bytes(), own.bytes());
  EXPECT_EQ(std::memcmp(placed.data(), own.data(), own.bytes()), 0);
  // A misaligned allocator is refused rather than handed to the kernels.
  auto buf = std::make_shared<std::vector<uint8_t>>(own.bytes() + 65);
  auto misaligned = [&](size_t) {
    uint8_t* p = buf->data();
    while (reinterpret_cast<uintptr_t>(p) % 64 != 1) ++p;
    return std::shared_ptr<uint8_t>(buf, p);
  };
  EXPECT_THROW(PackedWeight::pack(w, misaligned), Error);
}

// Groups packed in pieces on several threads give the same bytes as one serial pass.
TEST(PackedWeight, ParallelPackingGivesTheSameBytes) {
  std::mt19937 rng(5);
  ThreadPool pool(3);
  int calls = 0;
  ParallelFor parallel = [&](int64_t n, const std::function<void(int64_t, int64_t)>& body) {
    ++calls;
    pool.run([&](int tid, int nth) {
      Range r = split_range(n, tid, nth);
      if (r.begin < r.end) body(r.begin, r.end);
    });
  };
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q3_K, DType::F16}) {
    const int64_t n = 83, k = 256;
    auto bytes = random_rows(t, n, k, rng);
    Tensor w = testing::borrow_rows(t, n, k, bytes);
    PackedWeight serial = PackedWeight::pack(w);
    PackedWeight threaded = PackedWeight::pack(w, nullptr, parallel);
    ASSERT_EQ(serial.bytes(), threaded.bytes());
    EXPECT_EQ(0, std::memcmp(serial.data(), threaded.data(), serial.bytes())) << dtype_name(t);
  }
  EXPECT_EQ(calls, 5);
}

// Q2_K's and Q3_K's records hold each code where packed_weight.h says, read here from the GGUF
// blocks' own decoding (the round trip above reads them back through the packer's reader): the
// low 2 bits at bits 2j..2j+1 of crumb byte 4r+t (code of row r, input 4j+t), Q3_K's third bit
// at bit j of plane byte 4r+t for rows 0-7 and bit 4+j of byte 4(r-8)+t for rows 8-15; and
// Q2_K's sc and m as the low and high nibble of one byte per record and row.
TEST(PackedWeight, NarrowCodesAndNibbleFactorsLieWhereTheLayoutSays) {
  std::mt19937 rng(6);
  for (DType t : {DType::Q2_K, DType::Q3_K}) {
    const int64_t n = 16, k = 512;
    auto bytes = random_rows(t, n, k, rng);
    PackedWeight p = PackedWeight::pack(testing::borrow_rows(t, n, k, bytes));
    const PackedLayout L = packed_layout(t);
    const SplitScaleAreas areas =
        split_scale_areas(L.code_bytes, L.sub_block, L.has_min, L.nibble_factors, k);
    const size_t row_bytes = dtype_bytes(t, k), block_bytes = dtype_info(t).block_bytes;
    for (int r = 0; r < 16; ++r) {
      for (int64_t b = 0; b < k / 256; ++b) {
        const uint8_t* block = bytes.data() + r * row_bytes + b * block_bytes;
        uint8_t codes[256];
        decode_block(t, block, codes, nullptr, nullptr);
        const KQuantFactors f = decode_kquant_factors(t, block);
        for (int64_t s = 16 * b; s < 16 * (b + 1); ++s) {
          const uint8_t* rec = p.data() + s * L.record_bytes;
          for (int i = 0; i < 16; ++i) {
            const int j = i / 4, byte = 4 * r + i % 4;
            int code = (rec[byte] >> (2 * j)) & 3;
            if (t == DType::Q3_K) code |= ((rec[64 + byte % 32] >> (j + 4 * (r / 8))) & 1) << 2;
            ASSERT_EQ(code, codes[(s % 16) * 16 + i]) << dtype_name(t) << " row " << r;
          }
          const uint8_t factor = p.data()[areas.sc + 16 * s + r];
          if (t == DType::Q2_K) {
            EXPECT_EQ(factor, f.sc[s % 16] | f.m[s % 16] << 4) << "row " << r;
          } else {
            EXPECT_EQ(static_cast<int8_t>(factor), f.sc[s % 16]) << "row " << r;
          }
        }
      }
    }
  }
}

TEST(PackedWeight, RejectsBadShapes) {
  std::mt19937 rng(4);
  auto b1 = random_rows(DType::Q8_0, 4, 64, rng);
  auto b2 = random_rows(DType::Q8_0, 4, 32, rng);
  Tensor a = testing::borrow_rows(DType::Q8_0, 4, 64, b1);
  Tensor b = testing::borrow_rows(DType::Q8_0, 4, 32, b2);
  EXPECT_THROW(PackedWeight::pack_concat({a, b}), Error);  // K differs
  EXPECT_THROW(PackedWeight::pack_concat({}), Error);
  EXPECT_THROW(PackedWeight::pack(Tensor::borrow(DType::Q8_0, Shape{256}, b1.data())), Error);
  // 64 inputs is not a whole Q4_K super-block.
  EXPECT_THROW(PackedWeight::pack(Tensor::borrow(DType::Q4_K, Shape{1, 64}, b1.data())), Error);
  EXPECT_THROW(PackedWeight::pack(Tensor::empty(DType::I32, Shape{2, 4})), Error);
}

}  // namespace
}  // namespace kiln::kernels
