#include "kiln/kernels/packed_weight.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/dequant.h"
#include "kiln/kernels/quant_format.h"

namespace kiln::kernels {
namespace {

constexpr int R = PackedWeight::kGroupRows;

// Writes the codes of 16 rows x S inputs (row r's at codes[r * stride + k]) into a record's
// code area. Code k of row r lives in byte 4r + k%4 of 64-byte vector k/4 (8-bit codes), or, for
// 4 bits and more, its low nibble in vector (k/4) % nvec (the low nibbles of the first S/2 codes,
// the high nibbles of the rest) and its high bits in the plane after the nibble vectors. Packing
// is the cold start's largest cost after the page faults, so each row's 4-code words move as
// 32-bit words, 4 bytes per operation, with Bits and S as template arguments so every loop
// unrolls: byte loops with run-time widths took 1.38x the user time of a cold start of the
// Llama 3.1 8B shape (medians of 6 runs, 4.71 s against 3.42 s).
template <int Bits, int S>
void put_codes(const uint8_t* codes, int64_t stride, uint8_t* rec) {
  constexpr int nsub4 = S / 4;  // 4-code words per row
  constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;
  auto word = [](const uint8_t* p) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    return w;
  };
  for (int r = 0; r < R; ++r) {
    const uint8_t* c = codes + r * stride;
    uint8_t* at = rec + 4 * r;
    if constexpr (Bits < 4) {
      // Word j's codes (each below 2^Bits): their low 2 bits to bits 2j..2j+1 of the crumb
      // vector's bytes, a third bit to bit j of the plane's, whose bytes rows r and r + 8 share
      // (r + 8 in the high nibble; rows 0-7 come first and set the bytes).
      static_assert(S == 16, "2- and 3-bit codes in 16-input records");
      constexpr uint32_t kLowCrumbs = 0x03030303u, kThirdBits = 0x01010101u;
      uint32_t crumbs = 0, third = 0;
#pragma GCC unroll 4
      for (int j = 0; j < nsub4; ++j) {
        crumbs |= (word(c + 4 * j) & kLowCrumbs) << (2 * j);
        third |= ((word(c + 4 * j) >> 2) & kThirdBits) << j;
      }
      std::memcpy(at, &crumbs, 4);
      if constexpr (Bits == 3) {
        uint8_t* plane = rec + 64 + 4 * (r % 8);
        if (r >= 8) third = (third << 4) | word(plane);
        std::memcpy(plane, &third, 4);
      }
    } else if constexpr (Bits == 8) {
#pragma GCC unroll 8
      for (int j = 0; j < nsub4; ++j) std::memcpy(at + j * 64, c + 4 * j, 4);
    } else {
      constexpr int nvec = S / 8;  // nibble vectors
#pragma GCC unroll 4
      for (int v = 0; v < nvec; ++v) {
        const uint32_t packed =
            (word(c + 4 * v) & kLowNibbles) | ((word(c + 4 * (v + nvec)) & kLowNibbles) << 4);
        std::memcpy(at + v * 64, &packed, 4);
      }
      if constexpr (Bits > 4) {
        // Each byte's high bits (at most Bits - 4 of them) shifted into place within the byte:
        // the widest, 2 bits shifted by 6 (Q6_K's 4 words), still fits, so no byte carries into
        // the next.
        constexpr int width = Bits - 4;
        static_assert(width * nsub4 <= 8, "the plane byte holds every word's high bits");
        uint32_t plane = 0;
#pragma GCC unroll 8
        for (int j = 0; j < nsub4; ++j)
          plane |= ((word(c + 4 * j) >> 4) & kLowNibbles) << (width * j);
        std::memcpy(at + nvec * 64, &plane, 4);
      }
    }
  }
}

using PutCodesFn = void (*)(const uint8_t*, int64_t, uint8_t*);

PutCodesFn put_codes_fn(const PackedLayout& L) {
  if (L.bits == 8 && L.sub_block == 32) return put_codes<8, 32>;
  if (L.bits == 4 && L.sub_block == 32) return put_codes<4, 32>;
  if (L.bits == 4 && L.sub_block == 16) return put_codes<4, 16>;
  if (L.bits == 3 && L.sub_block == 16) return put_codes<3, 16>;
  if (L.bits == 2 && L.sub_block == 16) return put_codes<2, 16>;
  if (L.bits == 5 && L.sub_block == 32) return put_codes<5, 32>;
  if (L.bits == 6 && L.sub_block == 16) return put_codes<6, 16>;
  fail("pack: no code layout for {}-bit codes in {}-input records", L.bits, L.sub_block);
}

uint8_t get_code(const PackedLayout& L, const uint8_t* rec, int r, int k) {
  const int nvec = L.sub_block / 8;
  int j = k / 4, t = k % 4, byte = 4 * r + t;
  if (L.bits == 8) return rec[j * 64 + byte];
  if (L.bits < 4) {
    int c = (rec[byte] >> (2 * j)) & 3;
    if (L.bits == 3) c |= ((rec[64 + byte % 32] >> (4 * (r / 8) + j)) & 1) << 2;
    return static_cast<uint8_t>(c);
  }
  int c = (rec[(j % nvec) * 64 + byte] >> (4 * (j / nvec))) & 0x0F;
  const uint8_t* plane = rec + nvec * 64;
  if (L.bits == 5) c |= ((plane[byte] >> j) & 1) << 4;
  if (L.bits == 6) c |= ((plane[byte] >> (2 * j)) & 3) << 4;
  return static_cast<uint8_t>(c);
}

// Packs one 16-row group of a quantized type. rows[r] is null for padding rows, whose codes are
// the zero point (or 0) and whose scales and minimums are 0, so they read as 0.
void pack_quant_group(DType t, const PackedLayout& L, const uint8_t* const* rows, int64_t K,
                      uint8_t* out) {
  const DTypeInfo& info = dtype_info(t);
  const int S = L.sub_block;
  const int64_t nsub = K / S;
  const int bs = info.block_size, sub_per_block = bs / S;
  // Every element below is written before it is read (padding rows included), so the buffers
  // are not zeroed first: 16 x K code bytes a group, a cold start's worth of memset otherwise.
  // The K-quants' float scales are never computed: their records keep the file's factors. The
  // other types have no minimums, so only their scales are decoded.
  const QuantFormat& F = *L.format;
  const bool e8m0 = F.record_scale == RecordScale::E8M0;
  const bool record_min = L.has_min && !L.split_scales;
  auto codes = std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(R) * K);
  const size_t n_scales = L.split_scales ? 0 : static_cast<size_t>(R) * nsub;
  auto scale = std::make_unique_for_overwrite<float[]>(n_scales);
  auto min = std::make_unique_for_overwrite<float[]>(record_min ? n_scales : 0);
  // e8m0 scales are kept as the file's byte (one block per record), never as a float.
  auto scale_byte = std::make_unique_for_overwrite<uint8_t[]>(e8m0 ? n_scales : 0);
  std::vector<KQuantFactors> factors(L.split_scales ? static_cast<size_t>(R) * (K / bs) : 0);
  for (int r = 0; r < R; ++r) {
    if (rows[r] == nullptr) {
      // A lookup-table format's padding is index 0 (MXFP4's value 0; the others' scale is 0).
      const int pad = L.has_min || F.has_table ? 0 : L.zero_point;
      std::memset(&codes[static_cast<size_t>(r) * K], pad, K);
      if (!L.split_scales) std::fill_n(&scale[static_cast<size_t>(r) * nsub], nsub, 0.0f);
      if (record_min) std::fill_n(&min[static_cast<size_t>(r) * nsub], nsub, 0.0f);
      if (e8m0) std::fill_n(&scale_byte[static_cast<size_t>(r) * nsub], nsub, uint8_t{0});
      continue;
    }
    for (int64_t b = 0; b < K / bs; ++b) {
      const uint8_t* block = rows[r] + b * info.block_bytes;
      if (L.split_scales) {
        decode_block(t, block, &codes[r * K + b * bs], nullptr, nullptr);
        factors[r * (K / bs) + b] = decode_kquant_factors(t, block);
      } else {
        const int64_t at = r * nsub + b * sub_per_block;
        decode_block(t, block, &codes[r * K + b * bs], &scale[at], record_min ? &min[at] : nullptr);
        if (e8m0) scale_byte[at] = block[F.d_offset];
      }
    }
  }
  const PutCodesFn put = put_codes_fn(L);
  for (int64_t s = 0; s < nsub; ++s) {
    uint8_t* rec = out + s * L.record_bytes;
    put(&codes[s * S], K, rec);
    if (L.split_scales) continue;
    uint8_t* sc = rec + L.code_bytes;
    for (int r = 0; r < R; ++r) {
      if (e8m0) {
        sc[r] = scale_byte[r * nsub + s];
        continue;
      }
      uint16_t h = f32_to_f16(scale[r * nsub + s]);  // exact: the value was read from an f16
      std::memcpy(sc + 2 * r, &h, 2);
      if (record_min) {
        h = f32_to_f16(min[r * nsub + s]);  // exact likewise (an f16 negated)
        std::memcpy(sc + 32 + 2 * r, &h, 2);
      }
    }
  }
  if (!L.split_scales) return;
  const SplitScaleAreas a = split_scale_areas(L.code_bytes, S, L.has_min, L.nibble_factors, K);
  std::memset(out + a.sc, 0, a.end - a.sc);  // padding rows and the tail read as 0
  for (int r = 0; r < R; ++r) {
    if (rows[r] == nullptr) continue;
    for (int64_t b = 0; b < K / bs; ++b) {
      const KQuantFactors& f = factors[r * (K / bs) + b];
      std::memcpy(out + a.d + 32 * b + 2 * r, &f.d, 2);
      if (L.has_min) std::memcpy(out + a.dmin + 32 * b + 2 * r, &f.dmin, 2);
      for (int j = 0; j < sub_per_block; ++j) {
        const int64_t s = b * sub_per_block + j;
        if (L.nibble_factors) {  // both 4-bit (0..15), as the file holds them
          out[a.sc + 16 * s + r] = static_cast<uint8_t>(f.sc[j] | f.m[j] << 4);
          continue;
        }
        out[a.sc + 16 * s + r] = static_cast<uint8_t>(f.sc[j]);
        if (L.has_min) out[a.m + 16 * s + r] = static_cast<uint8_t>(f.m[j]);
      }
    }
  }
}

void pack_float_group(const PackedLayout& L, const uint8_t* const* rows, int64_t K, uint8_t* out) {
  const int e = L.elem_bytes;
  for (int64_t k = 0; k < K; ++k) {
    for (int r = 0; r < R; ++r) {
      uint8_t* dst = out + (k * R + r) * e;
      if (rows[r] == nullptr) {
        std::memset(dst, 0, e);
      } else {
        std::memcpy(dst, rows[r] + k * e, e);
      }
    }
  }
}

size_t group_bytes(const PackedLayout& L, int64_t K) {
  if (L.is_float) return static_cast<size_t>(K) * R * L.elem_bytes;
  if (L.split_scales)
    return split_scale_areas(L.code_bytes, L.sub_block, L.has_min, L.nibble_factors, K).end;
  return static_cast<size_t>(K / L.sub_block) * L.record_bytes;
}

}  // namespace

size_t packed_group_bytes(DType t, int64_t k) { return group_bytes(packed_layout(t), k); }

size_t packed_segment_offset(size_t bytes) { return (bytes + 63) / 64 * 64; }

PackedLayout packed_layout(DType t) {
  PackedLayout L{};
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      L.is_float = true;
      L.elem_bytes = t == DType::F32 ? 4 : 2;
      return L;
    default:
      break;
  }
  const QuantFormat* q = [t] {
    if (const QuantFormat* f = find_quant_format(t)) return f;
    fail("no packed weight format for {}", dtype_name(t));
  }();
  L.sub_block = q->sub_block;
  L.bits = q->bits;
  L.zero_point = q->zero_point;
  L.has_min = q->has_min;
  L.split_scales = q->split_scales;
  L.nibble_factors = q->nibble_factors;
  L.code_bytes = q->code_bytes();
  L.record_bytes = q->record_bytes();
  L.format = q;
  return L;
}

PackedWeight PackedWeight::pack(const Tensor& w, const PackedAllocator& alloc,
                                const ParallelFor& parallel) {
  return pack_concat({w}, alloc, parallel);
}

PackedWeight PackedWeight::pack_concat(const std::vector<Tensor>& ws, const PackedAllocator& alloc,
                                       const ParallelFor& parallel) {
  KILN_CHECK(!ws.empty(), "pack_concat: no weights");
  PackedWeight p;
  p.k_ = ws[0].shape().rank() == 2 ? ws[0].shape()[1] : -1;
  for (size_t i = 0; i < ws.size(); ++i) {
    const Tensor& w = ws[i];
    KILN_CHECK(w.shape().rank() == 2, "weight {} must be [N, K], got {}", i, w.shape().str());
    KILN_CHECK(w.shape()[1] == p.k_, "pack_concat: weight {} has K = {}, weight 0 has K = {}", i,
               w.shape()[1], p.k_);
    KILN_CHECK(w.contiguous() && w.data() != nullptr, "weight {} must be contiguous", i);
    PackedLayout L = packed_layout(w.dtype());
    const DTypeInfo& info = dtype_info(w.dtype());
    KILN_CHECK(p.k_ > 0 && p.k_ % info.block_size == 0,
               "weight {}: K = {} is not a positive multiple of the {} block size {}", i, p.k_,
               info.name, info.block_size);
    PackedSegment s{};
    s.dtype = w.dtype();
    s.n = w.shape()[0];
    s.col0 = p.n_;
    s.groups = (s.n + R - 1) / R;
    s.group0 = p.groups_;
    s.group_bytes = group_bytes(L, p.k_);
    s.offset = packed_segment_offset(p.bytes_);
    p.n_ += s.n;
    p.groups_ += s.groups;
    p.bytes_ = s.offset + s.group_bytes * static_cast<size_t>(s.groups);
    p.quantized_ = p.quantized_ || !L.is_float;
    p.segs_.push_back(s);
  }
  if (alloc) {
    p.data_ = alloc(p.bytes_);
    KILN_CHECK(p.data_ != nullptr && reinterpret_cast<uintptr_t>(p.data_.get()) % 64 == 0,
               "pack: the allocator must return 64-byte-aligned memory");
  } else {
    p.data_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(aligned_alloc64(p.bytes_)),
                                       [](uint8_t* q) { aligned_free(q); });
  }
  uint8_t* buf = p.data_.get();
  for (size_t i = 0; i + 1 < ws.size(); ++i) {  // the padding before each next segment
    const size_t end = p.segs_[i].offset + p.segs_[i].group_bytes * p.segs_[i].groups;
    std::memset(buf + end, 0, p.segs_[i + 1].offset - end);
  }
  for (size_t i = 0; i < ws.size(); ++i) {
    const PackedSegment& s = p.segs_[i];
    PackedLayout L = packed_layout(s.dtype);
    const auto* src = static_cast<const uint8_t*>(ws[i].data());
    size_t row_bytes = ws[i].row_bytes();
    auto pack_groups = [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        const uint8_t* rows[R];
        for (int r = 0; r < R; ++r) {
          int64_t row = g * R + r;
          rows[r] = row < s.n ? src + row * row_bytes : nullptr;
        }
        uint8_t* out = buf + s.offset + g * s.group_bytes;
        if (L.is_float) {
          pack_float_group(L, rows, p.k_, out);
        } else {
          pack_quant_group(s.dtype, L, rows, p.k_, out);
        }
      }
    };
    if (parallel) {
      parallel(s.groups, pack_groups);
    } else {
      pack_groups(0, s.groups);
    }
  }
  return p;
}

PackedWeight PackedWeight::segment_view(size_t first, size_t count) const {
  const size_t end = first + count;
  KILN_CHECK(count > 0 && end > first && end <= segs_.size(),
             "segment_view: segments [{}, {}) of a weight with {}", first, end, segs_.size());
  PackedWeight v;
  v.k_ = k_;
  const PackedSegment head = segs_.at(first);
  for (size_t i = first; i < end; ++i) {
    PackedSegment s = segs_.at(i);
    s.col0 -= head.col0;
    s.group0 -= head.group0;
    s.offset -= head.offset;
    v.n_ += s.n;
    v.groups_ += s.groups;
    v.bytes_ = s.offset + s.group_bytes * static_cast<size_t>(s.groups);
    v.quantized_ = v.quantized_ || !packed_layout(s.dtype).is_float;
    v.segs_.push_back(s);
  }
  // Shares ownership of the whole buffer, points at the first segment's bytes.
  v.data_ = std::shared_ptr<uint8_t>(data_, data_.get() + head.offset);
  return v;
}

std::string PackedWeight::format() const {
  std::string out;
  for (const PackedSegment& s : segs_) {
    if (!out.empty()) out += "+";
    bool is_float = packed_layout(s.dtype).is_float;
    out += fmt::format("{}x{}/{}", dtype_name(s.dtype), R, is_float ? "fma" : "vnni");
  }
  return out;
}

void PackedWeight::dequantize_row(int64_t row, float* dst) const {
  KILN_CHECK(row >= 0 && row < n_, "packed row {} out of range [0, {})", row, n_);
  const PackedSegment* seg = &segs_[0];
  for (const PackedSegment& s : segs_) {
    if (row >= s.col0 && row < s.col0 + s.n) seg = &s;
  }
  int64_t local = row - seg->col0;
  int r = static_cast<int>(local % R);
  const uint8_t* group = data_.get() + seg->offset + (local / R) * seg->group_bytes;
  PackedLayout L = packed_layout(seg->dtype);
  if (L.is_float) {
    for (int64_t k = 0; k < k_; ++k) {
      const uint8_t* e = group + (k * R + r) * L.elem_bytes;
      uint16_t h;
      std::memcpy(&h, e, 2);
      if (seg->dtype == DType::F32) {
        std::memcpy(&dst[k], e, 4);
      } else {
        dst[k] = seg->dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
    }
    return;
  }
  const int S = L.sub_block;
  const SplitScaleAreas a = split_scale_areas(L.code_bytes, S, L.has_min, L.nibble_factors, k_);
  auto f16_at = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_to_f32(h);
  };
  for (int64_t s = 0; s < k_ / S; ++s) {
    const uint8_t* rec = group + s * L.record_bytes;
    float scale, min = 0;
    if (L.split_scales) {
      const int64_t super = s * S / 256;
      const SplitFactors f = split_factors(L, group, a, s, r);
      scale = f16_at(group + a.d + 32 * super + 2 * r) * static_cast<float>(f.sc);
      if (L.has_min) min = f16_at(group + a.dmin + 32 * super + 2 * r) * static_cast<float>(f.m);
    } else if (L.format->record_scale == RecordScale::E8M0) {
      scale = e8m0_to_f32(rec[L.code_bytes + r]);
    } else {
      scale = f16_at(rec + L.code_bytes + 2 * r);
      if (L.has_min) min = f16_at(rec + L.code_bytes + 32 + 2 * r);
    }
    for (int k = 0; k < S; ++k) {
      int c = get_code(L, rec, r, k);
      dst[s * S + k] = L.has_min
                           ? scale * static_cast<float>(c) - min
                           : scale * static_cast<float>(L.format->code_value(c) - L.zero_point);
    }
  }
}

}  // namespace kiln::kernels
