// A weight matrix [N, K] (N output features, K inputs) repacked once at load into the layout
// the matmul kernels stream through.
//
// Each format's facts (bits, sub-block, zero point, split scales) come from quant_format.h.
// Rows are taken 16 at a time (a "group": one AVX-512 register of int32/f32 lanes per output
// column). Quantized types keep their own bit width so batch-1 decode reads no more bytes than
// the GGUF file holds (a few percent more for K-quants, whose scale factors are stored per
// 16-row group; see below), but the codes of the 16 rows are interleaved 4 bytes at a time, the
// operand shape of AVX512_VNNI vpdpbusd (u8 codes x s8 activations, 4 products per int32 lane). For
// each sub-block (32 inputs; 16 for Q6_K) of a group the record holds:
//   codes   8-bit types: S/4 vectors of 64 bytes; vector j, byte 4r+t = code(row r, input 4j+t)
//           4/5/6-bit:   S/8 vectors of nibbles; vector v holds input group v in its low
//                        nibbles and group v+S/8 in its high nibbles; 5- and 6-bit types add
//                        one 64-byte plane with the code bits above 4 (bit j, resp. bits
//                        2j..2j+1, of byte 4r+t belong to input group j)
//           2/3-bit:     (16-input records: Q2_K, Q3_K) one vector of 2-bit crumbs, byte 4r+t
//                        holding the low 2 bits of code(row r, input 4j+t) at bits 2j..2j+1;
//                        3-bit codes add a 32-byte plane of third bits: bit j of byte 4r+t
//                        for rows 0-7, bit 4+j of byte 4(r-8)+t for rows 8-15 (so each
//                        8-row half of the crumb vector takes one nibble of the plane)
//   scale   16 x f16 (Q4_0/Q5_0/Q8_0/IQ4_NL, whose scale is an f16), then 16 x f16 minimums
//           (Q4_1/Q5_1: -m); 16 e8m0 bytes (MXFP4); K-quants (and IQ4_XS) have none in the record
// Lookup-table formats (IQ4_NL, IQ4_XS, MXFP4) keep the file's 4-bit indices as codes: the
// kernels translate them (quant_format.h), so the packed form stays 4 bits a weight.
// K-quants (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K) keep their scales as the file does, as two factors, in
// areas after the group's records (split_scale_areas): per record 16 x int8 sc and (with a
// minimum) 16 x int8 m, or for Q2_K's 4-bit factors 16 bytes of sc | m << 4 (nibble_factors);
// per 256 inputs 16 x f16 d and (with a minimum) 16 x f16 dmin. The kernels form scale = d * sc and
// min = dmin * m in f32, where both products are exact, so the arithmetic is that of storing the
// products; storing the factors reads 4.625 bits per Q4_K weight instead of 6 (the file's 4.5).
// Codes are unsigned (Q8_0 is stored as q + 128); the zero point is subtracted in integers.
// F32/F16/BF16 weights keep their element type, laid out [K][16] per group.
// Padding rows (N not a multiple of 16) have zero scales and minimums, so they read as 0.
//
// pack_concat stacks several weights' rows (same K; dtypes may differ): each source becomes a
// segment with its own format, starting on its own group at a 64-byte-aligned offset (zero
// padding between segments), and every output column depends only on its own row, so a
// concatenated weight gives bit-identical columns to the separate ones. That also makes each
// segment a complete packed weight of its own: segment_view() serves the separate weights
// from the merged buffer (the weight store packs merged QKV and gate/up once, for both).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/base/tensor.h"

namespace kiln::kernels {

struct PackedSegment {
  DType dtype;         // the source type, which fixes the record layout
  int64_t n;           // rows of this segment
  int64_t col0;        // its first output column in the whole weight
  int64_t groups;      // ceil(n / 16)
  int64_t group0;      // its first group in the whole weight
  size_t group_bytes;  // bytes of one 16-row group (all of K)
  size_t offset;       // byte offset of its first group in the packed buffer
};

// Where packing puts the bytes (uninitialized memory of the size asked): by default a buffer of
// their own; the model's weight store passes an arena so all weights form one stream.
using PackedAllocator = std::function<std::shared_ptr<uint8_t>(size_t bytes)>;

// Runs body(begin, end) over pieces covering [0, n), possibly on several threads at once: the
// model's weight store passes one that spreads a weight's 16-row groups over its thread pool
// (each group is packed on its own, so the bytes do not depend on the split).
using ParallelFor =
    std::function<void(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body)>;

class PackedWeight {
 public:
  static constexpr int kGroupRows = 16;

  PackedWeight() = default;
  // w: [N, K], contiguous, of any storage dtype (F32, F16, BF16, Q4_0, Q5_0, Q8_0, Q4_K, Q5_K,
  // Q6_K). Throws kiln::Error otherwise.
  static PackedWeight pack(const Tensor& w, const PackedAllocator& alloc = nullptr,
                           const ParallelFor& parallel = nullptr);
  // Rows of every tensor, in order, as one [sum N, K] weight (merged QKV, gate/up).
  static PackedWeight pack_concat(const std::vector<Tensor>& ws,
                                  const PackedAllocator& alloc = nullptr,
                                  const ParallelFor& parallel = nullptr);

  // Segments [first, first + count) as a weight of their own, sharing this one's bytes (the
  // buffer stays alive while either does): the same bytes the separate weights would pack to.
  PackedWeight segment_view(size_t first, size_t count) const;

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  size_t bytes() const { return bytes_; }
  // "q8_0x16/vnni", "q5_0x16/vnni+q8_0x16/vnni", "f16x16/fma".
  std::string format() const;
  // dst[0..K) = row `row` as stored (for tests: equals the source row's dequantization exactly).
  void dequantize_row(int64_t row, float* dst) const;

  const std::vector<PackedSegment>& segments() const { return segs_; }
  int64_t groups() const { return groups_; }
  const uint8_t* data() const { return data_.get(); }
  // True when some segment is quantized (the matmul then quantizes the activations).
  bool quantized() const { return quantized_; }

  // The packed form as bytes (sizes, segments, then the data) for an on-disk cache
  // (packed_weight_io.cc), and back. deserialize() returns nullopt for bytes that are not one
  // whole, self-consistent packed weight (a truncated or foreign entry), never a bad weight.
  std::string serialize() const;
  static std::optional<PackedWeight> deserialize(std::string_view bytes,
                                                 const PackedAllocator& alloc = nullptr);
  // The same without the data: the header alone, and a weight made from a header whose bytes
  // already lie in memory (`data`, `available` bytes from there; e.g. a mapped cache file) and
  // stay there, owned by `data`. nullopt when the header is not self-consistent or the data
  // would run past `available`.
  std::string serialize_header() const;
  static std::optional<PackedWeight> view_from_header(std::string_view header,
                                                      std::shared_ptr<uint8_t> data,
                                                      size_t available);

 private:
  // The weight a header describes, without its data; `pos` is left just past the header.
  static std::optional<PackedWeight> parse_header(std::string_view in, size_t& pos);

  int64_t n_ = 0;
  int64_t k_ = 0;
  int64_t groups_ = 0;
  size_t bytes_ = 0;
  bool quantized_ = false;
  std::vector<PackedSegment> segs_;
  std::shared_ptr<uint8_t> data_;
};

struct QuantFormat;

// Layout facts shared by the packer and the kernels.
struct PackedLayout {
  bool is_float;   // F32/F16/BF16: [K][16] elements per group
  int elem_bytes;  // float types: 4 or 2
  int sub_block;   // quantized: inputs per record (32 or 16)
  int bits;        // quantized: code width
  int zero_point;  // quantized without min
  bool has_min;
  bool split_scales;    // K-quants: scale factors in areas after the records (split_scale_areas)
  bool nibble_factors;  // split scales: sc and m as the nibbles of one byte (Q2_K)
  int code_bytes;       // quantized: bytes of codes per record (incl. the high-bit plane)
  int record_bytes;     // quantized: codes + in-record scales; codes only with split_scales
  const QuantFormat* format;  // quantized: the table's row (scale storage, code table)
};
PackedLayout packed_layout(DType t);  // throws for types without a packed form

// Byte offsets from the start of a group of a split-scale type (k inputs, records of
// code_bytes each, sub_block inputs per record): the int8 sc of row r of record s at sc + 16 s + r,
// its int8 m at m + 16 s + r (has_min), the f16 d of the 256 inputs holding record s at d + 32
// (s * sub_block / 256), dmin likewise (has_min); `end` is the group's size, a multiple of 64.
// With nibble_factors sc and m share the byte at sc + 16 s + r (sc low, m high) and m == sc.
struct SplitScaleAreas {
  size_t sc, m, d, dmin, end;
};
constexpr SplitScaleAreas split_scale_areas(int code_bytes, int sub_block, bool has_min,
                                            bool nibble_factors, int64_t k) {
  const auto nsub = static_cast<size_t>(k / sub_block), nsuper = static_cast<size_t>(k / 256);
  SplitScaleAreas a{};
  a.sc = nsub * static_cast<size_t>(code_bytes);
  const size_t factor_bytes = nsub * 16;  // a byte per row and record
  a.m = nibble_factors ? a.sc : a.sc + factor_bytes;
  a.d = (has_min ? a.m : a.sc) + factor_bytes;
  a.dmin = a.d + nsuper * 32;
  a.end = (a.dmin + (has_min ? nsuper * 32 : 0) + 63) / 64 * 64;
  return a;
}
// The integer factors of row r of record s of a split-scale group (areas: the group's), m 0
// without a minimum.
struct SplitFactors {
  int sc, m;
};
inline SplitFactors split_factors(const PackedLayout& L, const uint8_t* group,
                                  const SplitScaleAreas& areas, int64_t s, int r) {
  const uint8_t sc = group[areas.sc + 16 * s + r];
  if (L.nibble_factors) return {sc & 0x0F, sc >> 4};
  return {static_cast<int8_t>(sc),
          L.has_min ? static_cast<int8_t>(group[areas.m + 16 * s + r]) : 0};
}

// Bytes of one 16-row group of a [*, k] weight of type t (throws like packed_layout).
size_t packed_group_bytes(DType t, int64_t k);
// Where a segment starts after `bytes` of earlier segments (64-byte aligned, see pack_concat).
size_t packed_segment_offset(size_t bytes);

}  // namespace kiln::kernels
