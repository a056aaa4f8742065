// The format table (quant_format.h) is what every reader of it says: the element types agree on
// block sizes, the packer on record layouts, and each ISA tier has exactly the kernel forms the
// table names. The kernels' arithmetic per format is checked in matmul_test.cc, which loops over
// the same table.
#include "kiln/kernels/quant_format.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/kernels/matmul_kernels.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {
namespace {

TEST(QuantFormat, EveryQuantizedTypeHasOneEntryAgreeingWithItsElementType) {
  int quantized = 0;
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    const DTypeInfo& info = dtype_info(t);
    const QuantFormat* f = find_quant_format(t);
    ASSERT_EQ(f != nullptr, info.quantized) << info.name;
    if (f == nullptr) {
      EXPECT_THROW(quant_format(t), Error) << info.name;
      continue;
    }
    ++quantized;
    EXPECT_EQ(&quant_format(t), f);
    EXPECT_EQ(f->block_size() % f->sub_block, 0) << info.name;
    EXPECT_EQ(f->has_min, f->dmin_offset >= 0) << info.name;
    EXPECT_EQ(f->has_min, f->zero_point == 0) << info.name;
    // The many-row kernels read 8-bit records as stored, and expand every narrower code.
    EXPECT_EQ(f->expand_for_many_rows, f->bits < 8) << info.name;
    // Codes below 4 bits come in 16-input records (one 64-byte crumb vector each).
    EXPECT_TRUE(f->bits >= 4 || f->sub_block == 16) << info.name;
    // Nibble factors are a split-scale format's sc and m.
    EXPECT_TRUE(!f->nibble_factors || (f->split_scales && f->has_min)) << info.name;
  }
  EXPECT_EQ(quantized, static_cast<int>(std::size(kQuantFormats)));
}

TEST(QuantFormat, ThePackerLaysRecordsOutAsTheTableSays) {
  for (const QuantFormat& f : kQuantFormats) {
    const PackedLayout L = packed_layout(f.dtype);
    EXPECT_FALSE(L.is_float);
    EXPECT_EQ(L.sub_block, f.sub_block);
    EXPECT_EQ(L.bits, f.bits);
    EXPECT_EQ(L.zero_point, f.zero_point);
    EXPECT_EQ(L.has_min, f.has_min);
    EXPECT_EQ(L.split_scales, f.split_scales);
    EXPECT_EQ(L.nibble_factors, f.nibble_factors);
    EXPECT_EQ(L.code_bytes, f.code_bytes());
    EXPECT_EQ(L.record_bytes, f.record_bytes());
    // Codes take bits / 8 bytes per weight of a 16-row record (plus the high-bit plane).
    EXPECT_GE(8 * f.code_bytes(), 16 * f.sub_block * f.bits) << dtype_name(f.dtype);
  }
}

// Every tier's dispatch finds a tile kernel for every format, and the many-row forms the table
// names; float types have tiles but no quantized many-row forms. (Only function pointers are
// looked up: nothing runs on a tier this machine lacks.)
TEST(QuantFormat, EachTierHasTheKernelFormsTheTableNames) {
  for (const QuantFormat& f : kQuantFormats) {
    const DType t = f.dtype;
    EXPECT_NE(tile_fn_scalar(t), nullptr) << dtype_name(t);
    EXPECT_NE(tile_fn_avx2(t), nullptr) << dtype_name(t);
    EXPECT_NE(tile_fn_avx512(t), nullptr) << dtype_name(t);
    const ChunkTiles chunk = chunk_tiles_avx2(t);
    EXPECT_NE(chunk.first, nullptr) << dtype_name(t);
    EXPECT_NE(chunk.tile, nullptr) << dtype_name(t);
    EXPECT_EQ(chunk.expanded, f.expand_for_many_rows) << dtype_name(t);
    EXPECT_EQ(chunk.sub_block, f.sub_block) << dtype_name(t);
    const ExpandedTiles ex = expanded_tiles_avx512(t);
    EXPECT_EQ(ex.expand != nullptr, f.expand_for_many_rows) << dtype_name(t);
    EXPECT_EQ(ex.pair != nullptr, f.expand_for_many_rows) << dtype_name(t);
    EXPECT_EQ(pair_tile_fn_avx512(t) != nullptr, !f.expand_for_many_rows) << dtype_name(t);
  }
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    EXPECT_NE(tile_fn_scalar(t), nullptr);
    EXPECT_NE(tile_fn_avx2(t), nullptr);
    EXPECT_NE(tile_fn_avx512(t), nullptr);
    EXPECT_EQ(chunk_tiles_avx2(t).tile, nullptr);
    EXPECT_EQ(expanded_tiles_avx512(t).expand, nullptr);
    EXPECT_EQ(pair_tile_fn_avx512(t), nullptr);
  }
  EXPECT_THROW(tile_fn_scalar(DType::I32), Error);
  EXPECT_THROW(tile_fn_avx2(DType::I32), Error);
  EXPECT_THROW(tile_fn_avx512(DType::I32), Error);
}

TEST(QuantFormat, VisitHandsOverTheEntryAsAConstant) {
  for (const QuantFormat& f : kQuantFormats) {
    const int bits = visit_quant_format(
        f.dtype, []<QuantFormat F>() { return std::integral_constant<int, F.bits>::value; }, -1);
    EXPECT_EQ(bits, f.bits);
  }
  EXPECT_EQ(visit_quant_format(
                DType::F16, []<QuantFormat F>() { return F.bits; }, -1),
            -1);
}

}  // namespace
}  // namespace kiln::kernels
