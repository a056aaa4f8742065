// kv_write: the pool layout, validation, the scalar reference conversions, ISA dispatch and
// the row split.
#include "kiln/kernels/kv_cache.h"

#include <cmath>
#include <limits>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/dispatch.h"
#include "kiln/kernels/kv_cache_isa.h"

namespace kiln::kernels {

// Rounds like cvtps2dq (nearest even; NaN and out-of-range give INT32_MIN), then saturates to
// int8 like the packs that follow it in the vector code.
static int8_t round_to_i8(float y) {
  int32_t i = std::numeric_limits<int32_t>::min();
  if (y >= -2147483648.0f && y < 2147483648.0f) i = static_cast<int32_t>(std::nearbyint(y));
  return static_cast<int8_t>(i < -128 ? -128 : (i > 127 ? 127 : i));
}

float quantize_q8_block_ref(const float* src, int8_t* dst, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(src[i]);
    amax = a > amax ? a : amax;
  }
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int64_t i = 0; i < n; ++i) dst[i] = round_to_i8(src[i] * inv);
  return amax / 127.0f;
}

namespace detail {
namespace {

void to_f16_row_ref(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace

constinit const KvFns kKvScalar = {to_f16_row_ref, quantize_q8_block_ref};

const KvFns& kv_fns() { return pick_isa(kKvScalar, kKvAvx2, kKvAvx512); }

}  // namespace detail

KvDtype parse_kv_dtype(std::string_view name) {
  if (name == "f16") return KvDtype::F16;
  if (name == "q8") return KvDtype::Q8;
  fail("unknown KV cache dtype '{}' (expected f16 or q8)", name);
}

const char* kv_dtype_name(KvDtype dtype) { return dtype == KvDtype::Q8 ? "q8" : "f16"; }

namespace {

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// Elements of one layer's K (or V) plane; checked against overflow of the whole pool.
size_t layer_elems(const KvGeometry& g) {
  KILN_CHECK(g.n_layers > 0 && g.n_kv_heads > 0 && g.head_dim > 0,
             "KV pool: layers ({}), KV heads ({}) and head_dim ({}) must be positive", g.n_layers,
             g.n_kv_heads, g.head_dim);
  KILN_CHECK(g.page_size > 0, "KV pool: page_size must be positive, got {}", g.page_size);
  KILN_CHECK(g.n_pages > 0 && g.n_pages <= std::numeric_limits<int32_t>::max(),
             "KV pool: n_pages must be in [1, 2^31), got {}", g.n_pages);
  // Room for 2 planes per layer of up to 2 bytes per element, plus q8's scales and padding.
  const size_t max_elems =
      std::numeric_limits<size_t>::max() / 8 / static_cast<size_t>(g.n_layers) - 64;
  size_t elems = static_cast<size_t>(g.n_pages);
  for (size_t f : {static_cast<size_t>(g.page_size), static_cast<size_t>(g.n_kv_heads),
                   static_cast<size_t>(g.head_dim)}) {
    KILN_CHECK(elems <= max_elems / f, "KV pool: size overflows");
    elems *= f;
  }
  return elems;
}

// q8: bytes of all int8 planes, where the scale planes start (64-byte aligned).
size_t q8_scales_offset(const KvGeometry& g) {
  return align64(layer_elems(g) * 2 * static_cast<size_t>(g.n_layers));
}

}  // namespace

size_t kv_bytes_per_token(const KvGeometry& g) {
  const size_t planes = 2 * static_cast<size_t>(g.n_layers) * static_cast<size_t>(g.n_kv_heads);
  const size_t hd = static_cast<size_t>(g.head_dim);
  return g.dtype == KvDtype::Q8 ? planes * (hd + sizeof(float)) : planes * hd * sizeof(uint16_t);
}

size_t kv_pool_bytes(const KvGeometry& g) {
  const size_t elems = layer_elems(g) * 2 * static_cast<size_t>(g.n_layers);
  if (g.dtype == KvDtype::F16) return elems * sizeof(uint16_t);
  const size_t scales = elems / static_cast<size_t>(g.head_dim) * sizeof(float);
  return q8_scales_offset(g) + scales;
}

KvLayerView kv_layer_view(const KvGeometry& g, void* pool, int layer) {
  KILN_CHECK(pool != nullptr, "KV pool: null base address");
  KILN_CHECK(layer >= 0 && layer < g.n_layers, "KV pool: layer {} out of range [0, {})", layer,
             g.n_layers);
  const size_t elems = layer_elems(g);
  KvLayerView v;
  v.n_pages = g.n_pages;
  v.page_size = g.page_size;
  v.n_kv_heads = g.n_kv_heads;
  v.head_dim = g.head_dim;
  v.dtype = g.dtype;
  // All K planes first, then all V planes: [K layer 0..L-1][V layer 0..L-1].
  const size_t k_plane = static_cast<size_t>(layer);
  const size_t v_plane = static_cast<size_t>(g.n_layers) + k_plane;
  if (g.dtype == KvDtype::F16) {
    auto* base = static_cast<uint16_t*>(pool);
    v.k = base + k_plane * elems;
    v.v = base + v_plane * elems;
    return v;
  }
  auto* base = static_cast<int8_t*>(pool);
  v.k8 = base + k_plane * elems;
  v.v8 = base + v_plane * elems;
  // The scale planes, in the same order, after every int8 plane.
  void* scale_planes = static_cast<char*>(pool) + q8_scales_offset(g);
  auto* scales = static_cast<float*>(scale_planes);
  const size_t scale_elems = elems / static_cast<size_t>(g.head_dim);
  v.k_scale = scales + k_plane * scale_elems;
  v.v_scale = scales + v_plane * scale_elems;
  return v;
}

void check_kv_view(const KvLayerView& view) {
  if (view.dtype == KvDtype::Q8) {
    KILN_CHECK(view.k8 != nullptr && view.v8 != nullptr && view.k_scale != nullptr &&
                   view.v_scale != nullptr,
               "kv cache view: null q8 K, V or scales");
  } else {
    KILN_CHECK(view.dtype == KvDtype::F16, "kv cache view: unknown dtype {}",
               static_cast<int>(view.dtype));
    KILN_CHECK(view.k != nullptr && view.v != nullptr, "kv cache view: null K or V");
  }
  KILN_CHECK(view.n_pages > 0 && view.page_size > 0 && view.n_kv_heads > 0 && view.head_dim > 0,
             "kv cache view: bad sizes pages={} page_size={} kv_heads={} head_dim={}", view.n_pages,
             view.page_size, view.n_kv_heads, view.head_dim);
}

void kv_write(const float* k, const float* v, const int32_t* slots, int64_t T,
              const KvLayerView& view, const ExecContext& ctx) {
  check_kv_view(view);
  KILN_CHECK(T >= 0, "kv_write: negative row count {}", T);
  // Checked on every thread before anyone writes: all threads agree, nothing half-written.
  const int64_t n_slots = view.n_slots();
  for (int64_t t = 0; t < T; ++t)
    KILN_CHECK(slots[t] < n_slots, "kv_write: slot {} of row {} is outside the pool ({} slots)",
               slots[t], t, n_slots);
  const int64_t row = view.row_elems();
  const auto& f = detail::kv_fns();
  Range r = detail::share(T, ctx, 1, (4096 + row - 1) / row);
  for (int64_t t = r.begin; t < r.end; ++t) {
    if (slots[t] < 0) continue;
    const int64_t base = static_cast<int64_t>(slots[t]) * row;
    if (view.dtype == KvDtype::Q8) {
      const int64_t sbase = static_cast<int64_t>(slots[t]) * view.n_kv_heads;
      for (int h = 0; h < view.n_kv_heads; ++h) {
        const int64_t off = static_cast<int64_t>(h) * view.head_dim;
        view.k_scale[sbase + h] =
            f.to_q8_block(k + t * row + off, view.k8 + base + off, view.head_dim);
        view.v_scale[sbase + h] =
            f.to_q8_block(v + t * row + off, view.v8 + base + off, view.head_dim);
      }
      continue;
    }
    f.to_f16_row(k + t * row, view.k + base, row);
    f.to_f16_row(v + t * row, view.v + base, row);
  }
}

}  // namespace kiln::kernels
