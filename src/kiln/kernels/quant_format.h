// The quantized weight formats kiln reads, in one table: what a GGUF block of each holds, how the
// packer lays its codes and scales out (packed_weight.h), and which kernel forms each ISA tier
// runs on it (matmul_kernels.h). The dequantizer, the packer, every tier's kernel dispatch and
// the kernel tests read this table; a format is added here once, not restated per ISA file.
//
// A weight is w = scale[s] * (code - zero_point), or w = scale[s] * code - min[s] for formats
// with a minimum, where s = element / sub_block and codes are unsigned, `bits` wide as packed.
// Lookup-table formats (IQ4_NL, IQ4_XS, MXFP4) store 4-bit indices; the code of index c is
// table[c] + 128 (the table's int8 value as an unsigned byte) with zero point 128, so that
// w = scale * table[c]: kernels translate the indices with a byte shuffle (pshufb / vpshufb),
// which keeps the packed form at 4 bits a weight. AVX-512 shuffles to the unsigned codes and
// subtracts the zero point as for Q8_0; AVX2, whose vpmaddubsw would overflow int16 on codes up
// to 255, shuffles to the signed values and multiplies with the sign trick (|w| x sign(a, w)),
// which gives the same integer dot with no zero point to subtract.
//
// Scales: split_scales rows keep the file's two factors per sub-block (d * sc, dmin * m);
// others keep their scale in each record as `record_scale` says (f16, with f16 minimums after
// them for has_min; MXFP4's e8m0 byte). The minimum step of the contract sums the sub-block's
// activation codes, 32 or 16 (Q2_K) of them.
//
// Kernels per tier (the same bits on every tier, see matmul_kernels.h):
//   scalar   a 16-column tile per group, any rows (the reference)
//   AVX2     the same tile up to 1 row; from 2 rows chunk kernels over slabs of rows, reading
//            8-bit records as stored, other widths expanded once per chunk to 8-bit records
//   AVX-512  the same tile up to kMaxTileRows rows; above that pair kernels (two groups a pass)
//            on 8-bit records as stored, other widths expanded once per group first
//   AMX      (on top of AVX-512, where usable) from kAmxMinRows rows, 16-row tiles of TDPBSUD
//            on the same 8-bit records as the pair kernels, the float step on AVX-512
// `expand_for_many_rows` says which of the two many-row forms a format takes.
//
// Codes narrower than 4 bits (Q2_K: 2, Q3_K: 3) keep their width packed, so the few-row tiles
// stream no more than the file's bits: 2-bit codes four to a byte, and Q3_K's third bit in a
// plane of its own (code_bytes, packed_weight.h). Q2_K's 4-bit sc and m share one byte per
// record and row, as in the file (`nibble_factors`): 2.625 bits a weight packed, as the file;
// Q3_K keeps its 6-bit sc - 32 as an int8: 3.5625 against the file's 3.4375. Their many-row
// forms unpack the codes to the same 8-bit records as every narrower width.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>

#include "kiln/base/dtype.h"

namespace kiln::kernels {

// How a record holds its own scales (formats without split scales): 16 f16 (and, with a
// minimum, 16 f16 minimums after them), or 16 e8m0 bytes (MXFP4: the file's exponent byte,
// 2^(e - 128) as ggml and gguf-py read it, which no f16 can hold).
enum class RecordScale : uint8_t { F16, E8M0 };

// (Fields in an order without padding holes: the one-byte ones first and last.)
struct QuantFormat {
  DType dtype;  // its GGUF block (elements, bytes) is dtype_info's, from the GGUF table
  RecordScale record_scale = RecordScale::F16;
  bool has_table = false;  // codes are indices into `table`
  int d_offset;            // byte offset of the block's scale d (of the super-block for K-quants)
  int dmin_offset;         // byte offset of the f16 dmin (Q4_1/Q5_1: m) of the minimums, -1 without
  int sub_block;           // elements sharing one scale: 32, or 16 for Q6_K, Q3_K, Q2_K
  int bits;                // code width, as the file's and as packed: 2, 3, 4, 5, 6 or 8
  int zero_point;          // subtracted from every code (formats without a minimum); 0 with one
  bool has_min;
  // K-quants (and IQ4_XS): each scale is the product of an f16 super-block factor and a small
  // integer per sub-block (d * sc, dmin * m). The packed form keeps the two factors in areas
  // after a group's records (split_scale_areas); other formats store their scales in the record.
  bool split_scales;
  // Many-row kernels unpack the codes to 8-bit records first (2- to 6-bit codes); 8-bit
  // records are read as stored.
  bool expand_for_many_rows;
  // Split scales whose sc and m are 4 bits (Q2_K): one byte per record and row holds both, sc in
  // the low nibble and m in the high one, as the file's `scales` bytes do, where other formats
  // have an int8 area for each (split_scale_areas).
  bool nibble_factors = false;
  std::array<int8_t, 16> table = {};  // the value of each index (lookup-table formats)

  constexpr int block_size() const { return dtype_info(dtype).block_size; }
  constexpr int block_bytes() const { return dtype_info(dtype).block_bytes; }

  // Packed bytes of codes per record of 16 rows x sub_block inputs: 8-bit codes as sub_block/4
  // vectors of 64 bytes; 4- to 6-bit codes as nibble vectors plus one 64-byte plane of high
  // bits; 2- and 3-bit codes (16-input records) as one 64-byte vector of 2-bit crumbs plus, for
  // 3 bits, a 32-byte plane of third bits (packed_weight.h).
  constexpr int code_bytes() const {
    if (bits == 8) return 16 * sub_block;
    if (bits < 4) return 4 * sub_block + (bits == 3 ? 2 * sub_block : 0);
    return 8 * sub_block + (bits > 4 ? 64 : 0);
  }
  // Bytes of the record's own scales (and minimums): none with split scales.
  constexpr int scale_bytes() const {
    if (split_scales) return 0;
    if (record_scale == RecordScale::E8M0) return 16;
    return has_min ? 64 : 32;
  }
  constexpr int record_bytes() const { return code_bytes() + scale_bytes(); }
  // The unsigned code the arithmetic sees for a packed code c (the table's entry + 128 for
  // lookup-table formats).
  constexpr int code_value(int c) const { return has_table ? table[c] + 128 : c; }
};

// ggml's kvalues_iq4nl: IQ4_NL's and IQ4_XS's non-linear 4-bit grid.
inline constexpr std::array<int8_t, 16> kIq4NlValues = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                        1,    13,   25,  38,  53,  69,  89,  113};

// Rows in the order the types were added. Block layouts are ggml's (the structs in dequant.h,
// which checks these offsets against them).
// clang-format off
inline constexpr QuantFormat kQuantFormats[] = {
    {.dtype = DType::Q4_0, .d_offset = 0, .dmin_offset = -1, .sub_block = 32, .bits = 4,
     .zero_point = 8, .has_min = false, .split_scales = false, .expand_for_many_rows = true},
    {.dtype = DType::Q5_0, .d_offset = 0, .dmin_offset = -1, .sub_block = 32, .bits = 5,
     .zero_point = 16, .has_min = false, .split_scales = false, .expand_for_many_rows = true},
    {.dtype = DType::Q8_0, .d_offset = 0, .dmin_offset = -1, .sub_block = 32, .bits = 8,
     .zero_point = 128, .has_min = false, .split_scales = false, .expand_for_many_rows = false},
    {.dtype = DType::Q4_K, .d_offset = 0, .dmin_offset = 2, .sub_block = 32, .bits = 4,
     .zero_point = 0, .has_min = true, .split_scales = true, .expand_for_many_rows = true},
    {.dtype = DType::Q5_K, .d_offset = 0, .dmin_offset = 2, .sub_block = 32, .bits = 5,
     .zero_point = 0, .has_min = true, .split_scales = true, .expand_for_many_rows = true},
    {.dtype = DType::Q6_K, .d_offset = 208, .dmin_offset = -1, .sub_block = 16, .bits = 6,
     .zero_point = 32, .has_min = false, .split_scales = true, .expand_for_many_rows = true},
    // w = d * q + m: a minimum of -m (exact: an f16 negated), stored per record as f16.
    {.dtype = DType::Q4_1, .d_offset = 0, .dmin_offset = 2, .sub_block = 32, .bits = 4,
     .zero_point = 0, .has_min = true, .split_scales = false, .expand_for_many_rows = true},
    // w = d * (sc - 32) * (q - 4), q = 3 bits (hmask bit set: +4): Q6_K's form with 3-bit codes
    // in 16-input records.
    {.dtype = DType::Q3_K, .d_offset = 108, .dmin_offset = -1, .sub_block = 16, .bits = 3,
     .zero_point = 4, .has_min = false, .split_scales = true, .expand_for_many_rows = true},
    // w = d * sc * q - dmin * m, 4-bit sc and m per 16 inputs: Q4_K's form with 2-bit codes in
    // 16-input records, sc and m sharing a byte as in the file.
    {.dtype = DType::Q2_K, .d_offset = 80, .dmin_offset = 82, .sub_block = 16, .bits = 2,
     .zero_point = 0, .has_min = true, .split_scales = true, .expand_for_many_rows = true,
     .nibble_factors = true},
    // w = d * (ls - 32) * kvalues_iq4nl[q], a 6-bit ls per 32 inputs: split scales like Q4_K's
    // without a minimum, 4-bit table indices.
    {.dtype = DType::IQ4_XS, .has_table = true, .d_offset = 0, .dmin_offset = -1,
     .sub_block = 32, .bits = 4, .zero_point = 128, .has_min = false, .split_scales = true,
     .expand_for_many_rows = true, .table = kIq4NlValues},
    // w = d * kvalues_iq4nl[q]: Q4_0's block with table indices for codes.
    {.dtype = DType::IQ4_NL, .has_table = true, .d_offset = 0, .dmin_offset = -1,
     .sub_block = 32, .bits = 4, .zero_point = 128, .has_min = false, .split_scales = false,
     .expand_for_many_rows = true, .table = kIq4NlValues},
    // w = d * q + m with 5-bit codes: Q4_1's minimum, Q5_0's codes.
    {.dtype = DType::Q5_1, .d_offset = 0, .dmin_offset = 2, .sub_block = 32, .bits = 5,
     .zero_point = 0, .has_min = true, .split_scales = false, .expand_for_many_rows = true},
    // w = 2^(e - 128) * kvalues_mxfp4[q] (fp4 e2m1 values doubled, ggml's form): the record keeps
    // the file's e8m0 byte, 4.25 bits a weight as the file. Padding rows read index 0, value 0.
    {.dtype = DType::MXFP4, .record_scale = RecordScale::E8M0, .has_table = true,
     .d_offset = 0, .dmin_offset = -1, .sub_block = 32, .bits = 4, .zero_point = 128,
     .has_min = false, .split_scales = false, .expand_for_many_rows = true,
     .table = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}},
};
// clang-format on

// Whether the AVX-512 and AMX many-row kernels' expanded records keep the format's f16 scales
// as they are (Q4_0, Q5_0, IQ4_NL); every other expanded form holds f32 scales and minimums.
constexpr bool expanded_keeps_f16_scales(const QuantFormat& f) {
  return !f.split_scales && f.record_scale == RecordScale::F16 && !f.has_min;
}

// The format of t, or null when t is not a quantized type.
constexpr const QuantFormat* find_quant_format(DType t) {
  for (const QuantFormat& f : kQuantFormats)
    if (f.dtype == t) return &f;
  return nullptr;
}
// The format of t; throws kiln::Error when t is not quantized.
const QuantFormat& quant_format(DType t);

namespace detail {
template <class Visit, class R, size_t... I>
R visit_quant_format(DType t, Visit& visit, R otherwise, std::index_sequence<I...> /*unused*/) {
  (void)((kQuantFormats[I].dtype == t
              ? (otherwise = visit.template operator()<kQuantFormats[I]>(), true)
              : false) ||
         ...);
  return otherwise;
}
}  // namespace detail

// visit.template operator()<F>() for the table entry F of t, with F a compile-time constant
// (so kernels take its fields as template arguments); `otherwise` when t is not quantized.
//   TileFn f = visit_quant_format(t, []<QuantFormat F>() { return tile<F.bits, F.sub_block>; },
//                                 TileFn{nullptr});
template <class Visit, class R>
R visit_quant_format(DType t, Visit&& visit, R otherwise) {
  return detail::visit_quant_format(t, visit, otherwise,
                                    std::make_index_sequence<std::size(kQuantFormats)>{});
}

}  // namespace kiln::kernels
