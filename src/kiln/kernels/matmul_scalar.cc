// Scalar tile kernels: the reference implementation of the arithmetic contract in
// matmul_kernels.h, over the same packed layout the vector kernels read. Vector tiers must match
// these results bit for bit.
#include <cmath>
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/dequant.h"
#include "kiln/kernels/matmul_kernels.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {
namespace {

constexpr int R = PackedWeight::kGroupRows;

// Code of row r, input k of a record (see packed_weight.h for the layout).
inline int record_code(int bits, int S, const uint8_t* rec, int r, int k) {
  const int nvec = S / 8;
  int j = k / 4, byte = 4 * r + k % 4;
  if (bits == 8) return rec[j * 64 + byte];
  if (bits < 4) {  // 2-bit crumbs, and a third bit from the plane's nibble of r's half
    int c = (rec[byte] >> (2 * j)) & 3;
    if (bits == 3) c |= ((rec[64 + byte % 32] >> (4 * (r / 8) + j)) & 1) << 2;
    return c;
  }
  int c = (rec[(j % nvec) * 64 + byte] >> (4 * (j / nvec))) & 0x0F;
  const uint8_t* plane = rec + nvec * 64;
  if (bits == 5) c |= ((plane[byte] >> j) & 1) << 4;
  if (bits == 6) c |= ((plane[byte] >> (2 * j)) & 3) << 4;
  return c;
}

inline float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The sum the contract's minimum step scales: ds = d_b * float(s32) for 32-input sub-blocks,
// and the same multiply on s16 for 16-input ones (Q2_K).
inline float min_sum(const ActView& a, int64_t row, int64_t blk, int64_t s, int S) {
  return S == 32 ? a.ds_at(row, blk) : a.d_at(row, blk) * static_cast<float>(a.s16_at(row, s));
}

template <QuantFormat F>
void tile_quant(const uint8_t* group, const ActView& a, int64_t row0, int mt, float* tile) {
  static const PackedLayout L = packed_layout(F.dtype);
  const int S = L.sub_block;
  const int64_t nsub = a.k / S;
  const SplitScaleAreas areas =
      split_scale_areas(L.code_bytes, S, L.has_min, L.nibble_factors, a.k);
  float acc[kMaxTileRows][R] = {};
  int codes[R][32];
  for (int64_t s = 0; s < nsub; ++s) {
    const uint8_t* rec = group + s * L.record_bytes;
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < S; ++k) codes[r][k] = F.code_value(record_code(L.bits, S, rec, r, k));
    float scale[R], min[R] = {};
    const int64_t super = s * S / 256;
    for (int r = 0; r < R; ++r) {
      if (L.split_scales) {  // d * sc and dmin * m: exact products (see packed_weight.h)
        const SplitFactors f = split_factors(L, group, areas, s, r);
        scale[r] = f16_at(group + areas.d + 32 * super + 2 * r) * static_cast<float>(f.sc);
        if (L.has_min)
          min[r] = f16_at(group + areas.dmin + 32 * super + 2 * r) * static_cast<float>(f.m);
      } else if constexpr (F.record_scale == RecordScale::E8M0) {
        scale[r] = e8m0_to_f32(rec[L.code_bytes + r]);
      } else {
        scale[r] = f16_at(rec + L.code_bytes + 2 * r);
        if (L.has_min) min[r] = f16_at(rec + L.code_bytes + 32 + 2 * r);
      }
    }
    const int64_t blk = s * S / 32;
    for (int i = 0; i < mt; ++i) {
      const int64_t row = row0 + i;
      const int8_t* q = a.q_at(row, s * S);
      int32_t sum = S == 32 ? a.s32_at(row, blk) : a.s16_at(row, s);
      float d = a.d_at(row, blk);
      for (int r = 0; r < R; ++r) {
        int32_t dot = L.has_min ? 0 : -L.zero_point * sum;
        for (int k = 0; k < S; ++k) dot += codes[r][k] * q[k];
        float t = scale[r] * d;
        acc[i][r] = std::fma(static_cast<float>(dot), t, acc[i][r]);
        if (L.has_min) acc[i][r] = std::fma(-min[r], min_sum(a, row, blk, s, S), acc[i][r]);
      }
    }
  }
  for (int i = 0; i < mt; ++i)
    for (int r = 0; r < R; ++r) tile[i * R + r] = acc[i][r];
}

template <DType T>
void tile_float(const uint8_t* group, const ActView& a, int64_t row0, int mt, float* tile) {
  float acc[kMaxTileRows][R] = {};
  for (int64_t k = 0; k < a.k; ++k) {
    float w[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* e = group + (k * R + r) * (T == DType::F32 ? 4 : 2);
      if constexpr (T == DType::F32) {
        std::memcpy(&w[r], e, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, e, 2);
        w[r] = T == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
    }
    for (int i = 0; i < mt; ++i) {
      float xv = a.x[(row0 + i) * a.x_stride + k];
      for (int r = 0; r < R; ++r) acc[i][r] = std::fma(xv, w[r], acc[i][r]);
    }
  }
  for (int i = 0; i < mt; ++i)
    for (int r = 0; r < R; ++r) tile[i * R + r] = acc[i][r];
}

}  // namespace

TileFn tile_fn_scalar(DType t) {
  switch (t) {
    case DType::F32:
      return tile_float<DType::F32>;
    case DType::F16:
      return tile_float<DType::F16>;
    case DType::BF16:
      return tile_float<DType::BF16>;
    default:
      break;
  }
  TileFn f = visit_quant_format(
      t, []<QuantFormat F>() -> TileFn { return tile_quant<F>; }, TileFn{nullptr});
  KILN_CHECK(f != nullptr, "matmul: no kernel for {} weights", dtype_name(t));
  return f;
}

void quantize_row_scalar(const float* x, int64_t k, int64_t stride, int8_t* q, float* d,
                         int32_t* s16, int32_t* s32, float* ds) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) {
      float v = std::fabs(xb[j]);
      if (v > amax) amax = v;  // NaN never wins (as vmaxps(v, amax) keeps amax)
    }
    float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    const float db = amax / 127.0f;
    d[b * stride] = db;
    int32_t sums[2] = {0, 0};
    for (int j = 0; j < 32; ++j) {
      float p = xb[j] * inv;
      // x86 cvtps2dq: round to nearest even; NaN or out of range gives INT32_MIN.
      int32_t c = (p >= -2147483648.0f && p < 2147483648.0f)
                      ? static_cast<int32_t>(std::nearbyint(p))
                      : INT32_MIN;
      c = c < -127 ? -127 : (c > 127 ? 127 : c);
      q[b * stride * 32 + j] = static_cast<int8_t>(c);
      sums[j / 16] += c;
    }
    s16[2 * b * stride] = sums[0];
    s16[(2 * b + 1) * stride] = sums[1];
    s32[b * stride] = sums[0] + sums[1];
    ds[b * stride] = db * static_cast<float>(sums[0] + sums[1]);
  }
}

}  // namespace kiln::kernels
