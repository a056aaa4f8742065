// The paged KV cache as kernels see it, and the one place its layout is defined.
//
// The pool holds K and V of every layer in one allocation. Element type:
//  - f16: K and V rows of kv_heads * head_dim f16 values per slot;
//  - q8: the same rows in int8, each (slot, kv_head) block of head_dim values quantized
//    symmetrically with its own f32 scale (x ~= q * scale, scale = max|x| / 127, q rounded to
//    nearest even). The scales live in planes of their own after all the int8 planes, so every
//    int8 row stays contiguous and aligned like the f16 one (docs/architecture.md, "Quantized
//    KV cache").
// A slot is page * page_size + offset; the row of slot s starts at element s * kv_heads *
// head_dim of its layer's K (or V) plane, its scales at s * kv_heads of the scale plane.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

enum class KvDtype : uint8_t { F16, Q8 };

// "f16" | "q8"; anything else throws kiln::Error naming the accepted values.
KvDtype parse_kv_dtype(std::string_view name);
const char* kv_dtype_name(KvDtype dtype);

// One layer of the pool. For f16, k and v point at the f16 planes; for q8, k8/v8 at the int8
// planes and k_scale/v_scale at their [slot][kv_head] f32 scales (k and v are null).
struct KvLayerView {
  uint16_t* k = nullptr;
  uint16_t* v = nullptr;
  int64_t n_pages = 0;
  int page_size = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  KvDtype dtype = KvDtype::F16;
  int8_t* k8 = nullptr;
  int8_t* v8 = nullptr;
  float* k_scale = nullptr;
  float* v_scale = nullptr;

  int64_t n_slots() const { return n_pages * page_size; }
  int64_t row_elems() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
};

// Shape and element type of the whole pool (every layer's K and V).
struct KvGeometry {
  int n_layers = 0;
  int64_t n_pages = 0;
  int page_size = 16;
  int n_kv_heads = 0;
  int head_dim = 0;
  KvDtype dtype = KvDtype::F16;
};

// Bytes one token occupies in the pool: K and V of every layer, scales included.
size_t kv_bytes_per_token(const KvGeometry& geometry);
// Bytes of the whole pool. Throws kiln::Error on bad sizes or when the size overflows.
size_t kv_pool_bytes(const KvGeometry& geometry);
// The view of `layer` in the pool at `pool` (kv_pool_bytes(geometry) bytes, 64-byte aligned).
KvLayerView kv_layer_view(const KvGeometry& geometry, void* pool, int layer);

// Throws kiln::Error unless the view is well formed (non-null planes of its dtype, positive
// sizes).
void check_kv_view(const KvLayerView& view);

// Stores rows of k and v (f32 [T, kv_heads*head_dim]) at slots[t]: converted to f16 (round to
// nearest even, as F16C does), or quantized to q8 per (slot, kv_head) block. slots[t] < 0
// marks an inert row (padding): skipped. Every thread validates all slots before writing
// anything, so a bad slot throws kiln::Error on all threads and leaves the cache untouched.
// Threads split the rows.
void kv_write(const float* k, const float* v, const int32_t* slots, int64_t T,
              const KvLayerView& view, const ExecContext& ctx);

// The q8 quantization of one block of n values (the scalar reference every ISA matches bit
// for bit): scale = max|x| / 127; q = x * (127 / max|x|) rounded to nearest even (0 for an
// all-zero block). Returns the scale.
float quantize_q8_block_ref(const float* src, int8_t* dst, int64_t n);

}  // namespace kiln::kernels
