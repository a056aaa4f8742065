// The quantized weight formats kiln reads, in one table: what a GGUF block of each holds, how the
// packer lays its codes and scales out (packed_weight.h), and which kernel forms each ISA tier
// runs on it (matmul_kernels.h). The dequantizer, the packer, every tier's kernel dispatch and
// the kernel tests read this table; a format is added here once, not restated per ISA file.
//
// A weight is w = scale[s] * (code - zero_point), or w = scale[s] * code - min[s] for formats
// with a minimum, where s = element / sub_block and codes are unsigned, `bits` wide.
//
// Kernels per tier (the same bits on every tier, see matmul_kernels.h):
//   scalar   a 16-column tile per group, any rows (the reference)
//   AVX2     the same tile up to 1 row; from 2 rows chunk kernels over slabs of rows, reading
//            8-bit records as stored, other widths expanded once per chunk to 8-bit records
//   AVX-512  the same tile up to kMaxTileRows rows; above that pair kernels (two groups a pass)
//            on 8-bit records as stored, other widths expanded once per group first
// `expand_for_many_rows` says which of the two many-row forms a format takes.
#pragma once
#include <cstddef>
#include <iterator>
#include <utility>

#include "kiln/base/dtype.h"

namespace kiln::kernels {

struct QuantFormat {
  DType dtype;      // its GGUF block (elements, bytes) is dtype_info's, from the GGUF table
  int d_offset;     // byte offset of the block's f16 scale d (of the super-block for K-quants)
  int dmin_offset;  // byte offset of the f16 dmin of the minimums, -1 without minimums
  int sub_block;    // elements sharing one scale: 32, or 16 for Q6_K
  int bits;         // code width: 4, 5, 6 or 8
  int zero_point;   // subtracted from every code (formats without a minimum); 0 with one
  bool has_min;
  // K-quants: each scale is the product of an f16 super-block factor and a small integer per
  // sub-block (d * sc, dmin * m). The packed form keeps the two factors in areas after a group's
  // records (split_scale_areas); other formats store one f16 scale per sub-block in the record.
  bool split_scales;
  // Many-row kernels unpack the codes to 8-bit records first (4-, 5-, 6-bit codes); 8-bit
  // records are read as stored.
  bool expand_for_many_rows;

  constexpr int block_size() const { return dtype_info(dtype).block_size; }
  constexpr int block_bytes() const { return dtype_info(dtype).block_bytes; }

  // Packed bytes of codes per record of 16 rows x sub_block inputs: 8-bit codes as sub_block/4
  // vectors of 64 bytes; narrower codes as nibble vectors plus one 64-byte plane of high bits.
  constexpr int code_bytes() const {
    return bits == 8 ? 16 * sub_block : 8 * sub_block + (bits > 4 ? 64 : 0);
  }
  // Codes plus the record's own 16 f16 scales (none with split scales).
  constexpr int record_bytes() const { return code_bytes() + (split_scales ? 0 : 32); }
};

// Field order: dtype, d_offset, dmin_offset, sub_block, bits,
// zero_point, has_min, split_scales, expand_for_many_rows. Block layouts are ggml's (the structs
// in dequant.h, which checks these offsets against them).
inline constexpr QuantFormat kQuantFormats[] = {
    {DType::Q4_0, 0, -1, 32, 4, 8, false, false, true},
    {DType::Q5_0, 0, -1, 32, 5, 16, false, false, true},
    {DType::Q8_0, 0, -1, 32, 8, 128, false, false, false},
    {DType::Q4_K, 0, 2, 32, 4, 0, true, true, true},
    {DType::Q5_K, 0, 2, 32, 5, 0, true, true, true},
    {DType::Q6_K, 208, -1, 16, 6, 32, false, true, true},
};

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
