// GGUF block layouts and their scalar dequantization: the reference every other weight path
// (repacking, matmul kernels, embedding lookup) is checked against.
//
// A quantized row is a sequence of blocks. Within a block every weight is an unsigned code times a
// scale, minus an offset that is either a constant zero point (Q4_0, Q5_0, Q8_0, Q6_K, Q3_K; the
// lookup-table formats' 128, see quant_format.h) or a per-sub-block minimum (Q4_K, Q5_K, Q2_K;
// Q4_1 and Q5_1, whose minimum is -m). `decode_block` exposes exactly that view (codes, scales,
// minimums); dequantize_row is written on top of it, and the weight packer reuses it so the packed
// form holds the same numbers.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>

#include "kiln/base/dtype.h"
#include "kiln/kernels/quant_format.h"

namespace kiln::kernels {

// Field order and sizes are those of ggml (little-endian; f16 scales stored as raw bits).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];  // element j in the low nibble of qs[j], element j+16 in the high nibble
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];   // bit j (little-endian u32) is bit 4 of element j
  uint8_t qs[16];  // as Q4_0
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;      // w = d * q + m
  uint8_t qs[16];  // as Q4_0
};
struct BlockQ4_K {  // 8 sub-blocks of 32, 6-bit scales and minimums packed in `scales`
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];  // 64-element chunks: low nibbles = sub-block 2c, high = 2c+1
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // bit j of qh[l] is bit 4 of element 32j + l
  uint8_t qs[128];
};
struct BlockQ6_K {  // 16 sub-blocks of 16, int8 scales
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
struct BlockQ3_K {    // 16 sub-blocks of 16, 6-bit scales (minus 32) packed in `scales`
  uint8_t hmask[32];  // bit j of hmask[l] is bit 2 of element 32j + l
  uint8_t qs[64];     // 128-element halves: element 32c + l's low 2 bits at qs[32h + l] >> 2c
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ2_K {     // 16 sub-blocks of 16
  uint8_t scales[16];  // sub-block j: scale in the low nibble, minimum in the high one
  uint8_t qs[64];      // as Q3_K's low 2 bits
  uint16_t d;
  uint16_t dmin;
};
struct BlockIQ4_XS {  // 8 sub-blocks of 32, 6-bit scales ls (w = d * (ls - 32) * value)
  uint16_t d;
  uint16_t scales_h;    // bits 2j, 2j + 1: the top 2 bits of ls[j]
  uint8_t scales_l[4];  // ls[j]'s low 4 bits: nibble j % 2 of byte j / 2
  uint8_t qs[128];      // sub-block j at 16j: element l low nibble, element 16 + l high
};
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];  // as Q4_0: indices into kvalues_iq4nl
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;      // w = d * q + m
  uint8_t qh[4];   // as Q5_0
  uint8_t qs[16];  // as Q4_0
};
struct BlockMXFP4 {
  uint8_t e;       // e8m0 scale: 2^(e - 128) of the doubled fp4 values (e8m0_to_f32)
  uint8_t qs[16];  // as Q4_0: indices into kvalues_mxfp4
};
// The format table (quant_format.h) states the same layouts: block sizes and scale offsets.
// (A loop over the table, not find_quant_format: GCC's -fsanitize=null instrumentation makes a
// pointer's comparison with nullptr non-constant, which broke these asserts in the sanitize
// build.)
template <class Block>
constexpr bool matches_format(DType t, size_t d_offset, int dmin_offset = -1) {
  for (const QuantFormat& f : kQuantFormats) {
    if (f.dtype == t) {
      return f.block_bytes() == static_cast<int>(sizeof(Block)) &&
             f.d_offset == static_cast<int>(d_offset) && f.dmin_offset == dmin_offset;
    }
  }
  return false;
}
static_assert(matches_format<BlockQ4_0>(DType::Q4_0, offsetof(BlockQ4_0, d)));
static_assert(matches_format<BlockQ5_0>(DType::Q5_0, offsetof(BlockQ5_0, d)));
static_assert(matches_format<BlockQ8_0>(DType::Q8_0, offsetof(BlockQ8_0, d)));
static_assert(matches_format<BlockQ4_K>(DType::Q4_K, offsetof(BlockQ4_K, d),
                                        offsetof(BlockQ4_K, dmin)));
static_assert(matches_format<BlockQ5_K>(DType::Q5_K, offsetof(BlockQ5_K, d),
                                        offsetof(BlockQ5_K, dmin)));
static_assert(matches_format<BlockQ6_K>(DType::Q6_K, offsetof(BlockQ6_K, d)));
static_assert(matches_format<BlockQ4_1>(DType::Q4_1, offsetof(BlockQ4_1, d),
                                        offsetof(BlockQ4_1, m)));
static_assert(matches_format<BlockQ3_K>(DType::Q3_K, offsetof(BlockQ3_K, d)));
static_assert(matches_format<BlockQ2_K>(DType::Q2_K, offsetof(BlockQ2_K, d),
                                        offsetof(BlockQ2_K, dmin)));
static_assert(matches_format<BlockIQ4_XS>(DType::IQ4_XS, offsetof(BlockIQ4_XS, d)));
static_assert(matches_format<BlockIQ4_NL>(DType::IQ4_NL, offsetof(BlockIQ4_NL, d)));
static_assert(matches_format<BlockQ5_1>(DType::Q5_1, offsetof(BlockQ5_1, d),
                                        offsetof(BlockQ5_1, m)));
static_assert(matches_format<BlockMXFP4>(DType::MXFP4, offsetof(BlockMXFP4, e)));

// ggml's e8m0 scale byte as f32, 2^(e - 128) (ggml_e8m0_to_fp32_half: MXFP4's scale of its
// doubled fp4 values), for every byte: e < 2 gives the subnormals 2^-128 and 2^-127, e = 255
// gives 2^127 (ggml reads no NaN).
inline float e8m0_to_f32(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// Decodes one block of a quantized type: codes[block_size] (unsigned, < 2^bits),
// scale[block_size / sub_block], and (has_min types) min[block_size / sub_block]. The values
// are bit-exact to ggml's dequantization: scale and min are computed as ggml computes d * sc.
// For the K-quants (Q4_K, Q5_K, Q6_K) scale and min may be null: codes only (the packer keeps
// their factors from decode_kquant_factors instead); types without minimums never write min.
void decode_block(DType t, const void* block, uint8_t* codes, float* scale, float* min);

// The two factors of each scale of a split-scale block (quant_format.h) as the file stores them:
// sub-block j's scale is f16(d) * sc[j] and its minimum f16(dmin) * m[j] (Q4_K/Q5_K: 8 sub-blocks,
// 6-bit sc and m; Q6_K: 16 sub-blocks, signed 8-bit sc, no minimum; Q3_K: 16 sub-blocks, 6-bit
// sc - 32; Q2_K: 16 sub-blocks, 4-bit sc and m; IQ4_XS: 8 sub-blocks, 6-bit ls - 32). Codes of
// lookup-table formats are their indices (quant_format.h: code_value gives the arithmetic's). Both
// products are exact in f32 (an 11-bit mantissa times at most 8 bits), so they equal decode_block's
// scale and min.
struct KQuantFactors {
  uint16_t d = 0, dmin = 0;  // f16 bits
  int8_t sc[16] = {};
  int8_t m[16] = {};
};
KQuantFactors decode_kquant_factors(DType t, const void* block);

// dst[0..n) = the n values of a row of type t (n a multiple of the block size). Scalar
// reference for F32, F16, BF16 and every quantized type; throws for types without storage.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

}  // namespace kiln::kernels
