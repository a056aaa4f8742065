#include "kiln/kernels/dequant.h"

#include <cstring>

#include "kiln/base/error.h"
#include "kiln/base/half.h"

namespace kiln::kernels {
namespace {

// Blocks may sit at any byte offset (18- and 22-byte blocks), so they are copied out, never
// dereferenced in place.
template <typename Block>
Block load_block(const void* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

// The 6-bit scale and minimum of sub-block j of a Q4_K/Q5_K block (ggml's 12-byte packing:
// sub-blocks 0-3 in the low 6 bits of bytes 0-7, sub-blocks 4-7 split between the nibbles of
// bytes 8-11 and the top 2 bits of bytes 0-7).
void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The 8 scales d * sc[j] and minimums dmin * m[j] of a Q4_K/Q5_K block.
void k_scales_mins(uint16_t d16, uint16_t dmin16, const uint8_t* scales, float* scale, float* min) {
  const float d = f16_to_f32(d16), dmin = f16_to_f32(dmin16);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    k_scale_min(scales, j, &sc, &m);
    scale[j] = d * static_cast<float>(sc);
    min[j] = dmin * static_cast<float>(m);
  }
}

void decode_q4_0(const void* p, uint8_t* q, float* scale) {
  auto b = load_block<BlockQ4_0>(p);
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 0x0F;
    q[j + 16] = b.qs[j] >> 4;
  }
  scale[0] = f16_to_f32(b.d);
}

// Q4_1's minimum is -m: scale * q - (-m) is d * q + m exactly (the negation of an f16 is exact,
// and a - (-b) is the same IEEE operation as a + b), gguf-py's `d * qs + m`.
void decode_q4_1(const void* p, uint8_t* q, float* scale, float* min) {
  auto b = load_block<BlockQ4_1>(p);
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 0x0F;
    q[j + 16] = b.qs[j] >> 4;
  }
  scale[0] = f16_to_f32(b.d);
  if (min != nullptr) min[0] = -f16_to_f32(b.m);
}

// Q5_0's (and Q5_1's) codes: the nibbles of qs with bit 4 from the u32 qh.
void q5_codes(const uint8_t* qh_bytes, const uint8_t* qs, uint8_t* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<uint8_t>((qs[j] & 0x0F) | (((qh >> j) & 1) << 4));
    q[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
  }
}

void decode_q5_0(const void* p, uint8_t* q, float* scale) {
  auto b = load_block<BlockQ5_0>(p);
  q5_codes(b.qh, b.qs, q);
  scale[0] = f16_to_f32(b.d);
}

// Q5_1's minimum is -m, as Q4_1's.
void decode_q5_1(const void* p, uint8_t* q, float* scale, float* min) {
  auto b = load_block<BlockQ5_1>(p);
  q5_codes(b.qh, b.qs, q);
  scale[0] = f16_to_f32(b.d);
  if (min != nullptr) min[0] = -f16_to_f32(b.m);
}

void decode_q8_0(const void* p, uint8_t* q, float* scale) {
  auto b = load_block<BlockQ8_0>(p);
  for (int j = 0; j < 32; ++j) q[j] = static_cast<uint8_t>(b.qs[j] + 128);
  scale[0] = f16_to_f32(b.d);
}

void decode_q4_k(const void* p, uint8_t* q, float* scale, float* min) {
  auto b = load_block<BlockQ4_K>(p);
  if (scale != nullptr) k_scales_mins(b.d, b.dmin, b.scales, scale, min);
  for (int j = 0; j < 8; j += 2) {  // a pair of sub-blocks shares 32 bytes: low, then high nibbles
    const uint8_t* qs = b.qs + (j / 2) * 32;
    for (int l = 0; l < 32; ++l) {
      q[j * 32 + l] = qs[l] & 0x0F;
      q[j * 32 + 32 + l] = qs[l] >> 4;
    }
  }
}

void decode_q5_k(const void* p, uint8_t* q, float* scale, float* min) {
  auto b = load_block<BlockQ5_K>(p);
  if (scale != nullptr) k_scales_mins(b.d, b.dmin, b.scales, scale, min);
  for (int j = 0; j < 8; ++j) {
    const uint8_t* qs = b.qs + (j / 2) * 32;
    int shift = (j % 2) * 4;
    for (int l = 0; l < 32; ++l)
      q[j * 32 + l] = static_cast<uint8_t>(((qs[l] >> shift) & 0x0F) | (((b.qh[l] >> j) & 1) << 4));
  }
}

void decode_q6_k(const void* p, uint8_t* q, float* scale) {
  auto b = load_block<BlockQ6_K>(p);
  if (scale != nullptr) {
    const float d = f16_to_f32(b.d);
    for (int s = 0; s < 16; ++s) scale[s] = d * static_cast<float>(b.scales[s]);
  }
  // Two halves of 128; in each, element 32c + l takes its low nibble from
  // ql[64h + 32(c&1) + l] (shifted by 4 for c >= 2) and its top 2 bits from qh[32h + l] >> 2c.
  for (int h = 0; h < 2; ++h) {
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        int lo = (b.ql[64 * h + 32 * (c & 1) + l] >> (4 * (c >> 1))) & 0x0F;
        int hi = (b.qh[32 * h + l] >> (2 * c)) & 3;
        q[128 * h + 32 * c + l] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
}

// The 2-bit codes of Q2_K and the low 2 bits of Q3_K's: element 32c + l of half h at
// qs[32h + l] >> 2c.
int low2(const uint8_t* qs, int i) {
  const int h = i / 128, c = (i % 128) / 32, l = i % 32;
  return (qs[32 * h + l] >> (2 * c)) & 3;
}

// Sub-block j's scale of a Q3_K block, sc - 32: the low nibble from bytes 0-7 (low nibbles for
// j < 8, high ones above), the top 2 bits from byte 8 + j % 4 (bits 2 (j / 4) and up).
int q3_k_scale(const uint8_t* s, int j) {
  const int low = j < 8 ? s[j] & 0x0F : s[j - 8] >> 4;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

void decode_q3_k(const void* p, uint8_t* q, float* scale) {
  auto b = load_block<BlockQ3_K>(p);
  if (scale != nullptr) {
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < 16; ++j) scale[j] = d * static_cast<float>(q3_k_scale(b.scales, j));
  }
  // Codes 0..7 with zero point 4: the low 2 bits, plus 4 where the hmask bit is set (gguf-py's
  // low - 4 * (1 - bit)).
  for (int i = 0; i < 256; ++i) {
    const int bit = (b.hmask[i % 32] >> (i / 32)) & 1;
    q[i] = static_cast<uint8_t>(low2(b.qs, i) | (bit << 2));
  }
}

void decode_q2_k(const void* p, uint8_t* q, float* scale, float* min) {
  auto b = load_block<BlockQ2_K>(p);
  if (scale != nullptr) {
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    for (int j = 0; j < 16; ++j) {
      scale[j] = d * static_cast<float>(b.scales[j] & 0x0F);
      min[j] = dmin * static_cast<float>(b.scales[j] >> 4);
    }
  }
  for (int i = 0; i < 256; ++i) q[i] = static_cast<uint8_t>(low2(b.qs, i));
}

// Sub-block j's scale of an IQ4_XS block, ls - 32.
int iq4_xs_scale(const BlockIQ4_XS& b, int j) {
  const int low = (b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
  const int high = (b.scales_h >> (2 * j)) & 3;
  return (low | (high << 4)) - 32;
}

// Index codes (the table is applied by code_value) and d * (ls - 32), as gguf-py's dl.
void decode_iq4_xs(const void* p, uint8_t* q, float* scale) {
  auto b = load_block<BlockIQ4_XS>(p);
  if (scale != nullptr) {
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < 8; ++j) scale[j] = d * static_cast<float>(iq4_xs_scale(b, j));
  }
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 16; ++l) {
      q[32 * j + l] = b.qs[16 * j + l] & 0x0F;
      q[32 * j + 16 + l] = b.qs[16 * j + l] >> 4;
    }
  }
}

void decode_iq4_nl(const void* p, uint8_t* q, float* scale) {
  auto b = load_block<BlockIQ4_NL>(p);
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 0x0F;
    q[j + 16] = b.qs[j] >> 4;
  }
  scale[0] = f16_to_f32(b.d);
}

void decode_mxfp4(const void* p, uint8_t* q, float* scale) {
  auto b = load_block<BlockMXFP4>(p);
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 0x0F;
    q[j + 16] = b.qs[j] >> 4;
  }
  scale[0] = e8m0_to_f32(b.e);
}

}  // namespace

const QuantFormat& quant_format(DType t) {
  if (const QuantFormat* f = find_quant_format(t)) return *f;
  fail("{} is not a quantized type", dtype_name(t));
}

KQuantFactors decode_kquant_factors(DType t, const void* block) {
  KQuantFactors f;
  if (t == DType::IQ4_XS) {
    auto b = load_block<BlockIQ4_XS>(block);
    f.d = b.d;
    for (int j = 0; j < 8; ++j) f.sc[j] = static_cast<int8_t>(iq4_xs_scale(b, j));
    return f;
  }
  if (t == DType::Q2_K) {
    auto b = load_block<BlockQ2_K>(block);
    f.d = b.d;
    f.dmin = b.dmin;
    for (int j = 0; j < 16; ++j) {
      f.sc[j] = static_cast<int8_t>(b.scales[j] & 0x0F);
      f.m[j] = static_cast<int8_t>(b.scales[j] >> 4);
    }
    return f;
  }
  if (t == DType::Q3_K) {
    auto b = load_block<BlockQ3_K>(block);
    f.d = b.d;
    for (int j = 0; j < 16; ++j) f.sc[j] = static_cast<int8_t>(q3_k_scale(b.scales, j));
    return f;
  }
  if (t == DType::Q6_K) {
    auto b = load_block<BlockQ6_K>(block);
    f.d = b.d;
    std::memcpy(f.sc, b.scales, 16);
    return f;
  }
  KILN_CHECK(t == DType::Q4_K || t == DType::Q5_K, "decode_kquant_factors: {} has no split scales",
             dtype_name(t));
  // Q4_K and Q5_K share the header: d, dmin, then the 12 bytes of 6-bit scales and minimums.
  auto b = load_block<BlockQ4_K>(block);
  f.d = b.d;
  f.dmin = b.dmin;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    k_scale_min(b.scales, j, &sc, &m);
    f.sc[j] = static_cast<int8_t>(sc);
    f.m[j] = static_cast<int8_t>(m);
  }
  return f;
}

void decode_block(DType t, const void* block, uint8_t* codes, float* scale, float* min) {
  switch (t) {
    case DType::Q4_0:
      return decode_q4_0(block, codes, scale);
    case DType::Q5_0:
      return decode_q5_0(block, codes, scale);
    case DType::Q8_0:
      return decode_q8_0(block, codes, scale);
    case DType::Q4_K:
      return decode_q4_k(block, codes, scale, min);
    case DType::Q5_K:
      return decode_q5_k(block, codes, scale, min);
    case DType::Q6_K:
      return decode_q6_k(block, codes, scale);
    case DType::Q4_1:
      return decode_q4_1(block, codes, scale, min);
    case DType::Q3_K:
      return decode_q3_k(block, codes, scale);
    case DType::Q2_K:
      return decode_q2_k(block, codes, scale, min);
    case DType::IQ4_XS:
      return decode_iq4_xs(block, codes, scale);
    case DType::IQ4_NL:
      return decode_iq4_nl(block, codes, scale);
    case DType::Q5_1:
      return decode_q5_1(block, codes, scale, min);
    case DType::MXFP4:
      return decode_mxfp4(block, codes, scale);
    default:
      fail("decode_block: {} is not a quantized type", dtype_name(t));
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        dst[i] = t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    default:
      break;
  }
  const QuantFormat& qs = [t]() -> const QuantFormat& {
    if (const QuantFormat* f = find_quant_format(t)) return *f;
    fail("dequantize_row: {} has no element storage", dtype_name(t));
  }();
  KILN_CHECK(n % qs.block_size() == 0, "dequantize_row: {} elements is not whole {} blocks", n,
             dtype_name(t));
  uint8_t codes[256];
  // decode_block writes min for the formats with one (the only ones that read it); zeroed so
  // that is plain without the table's has_min in view (clang-analyzer reads it as unset).
  float scale[16], min[16] = {};
  for (int64_t b = 0; b < n / qs.block_size(); ++b) {
    decode_block(t, bytes + b * qs.block_bytes(), codes, scale, min);
    float* out = dst + b * qs.block_size();
    for (int i = 0; i < qs.block_size(); ++i) {
      int s = i / qs.sub_block;
      // The same float operations as ggml: scale * (code - zp), or scale * code - min
      // (lookup-table formats: scale * table[index], the code being table[index] + 128).
      out[i] = qs.has_min ? scale[s] * static_cast<float>(codes[i]) - min[s]
                          : scale[s] * static_cast<float>(qs.code_value(codes[i]) - qs.zero_point);
    }
  }
}

}  // namespace kiln::kernels
