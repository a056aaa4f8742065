#include "kiln/kernels/matmul_acts.h"

#include <algorithm>

#include "kiln/base/amx.h"
#include "kiln/base/cpu_features.h"
#include "kiln/base/error.h"

namespace kiln::kernels {
namespace {

// Rows the bf16 contract's activations hold for m rows: whole 16-row tiles.
size_t bf16_rows(int64_t m) { return static_cast<size_t>((m + 15) / 16 * 16); }

QuantizeRowFn quantize_row_fn() {
  switch (active_isa()) {
    case Isa::Avx512:
      return quantize_row_avx512;
    case Isa::Avx2:
      return quantize_row_avx2;
    default:
      return quantize_row_scalar;
  }
}

// Whether any segment of w has AMX tiles (else its activations keep the AVX-512 layout).
bool has_amx_form(const PackedWeight& w) {
  for (const PackedSegment& seg : w.segments())
    if (amx_tiles_for(seg.dtype).rest != nullptr) return true;
  return false;
}

// The activation layout the tiles of m rows read (ActView::slab_rows): slabs of 4 rows, one
// AVX2 many-row sub-tile each, wherever many_row_tiles picks those tiles; slabs of kAmxTileRows
// rows where amx_tiles picks AMX for a weight with an AMX form, one tile each (the AVX-512 tiles
// of a merged weight's other segments read them as well: their tiles never straddle a slab;
// the pair kernels measured 3-4% slower on them than on 8-row slabs, so a weight without an AMX
// form keeps those); slabs of kMaxTileRows
// rows on AVX-512 above that many rows, one 8-row tile or two 4-row pair tiles each, so that a
// tile reads its rows' codes in address order (all m rows block-major put a tile's blocks 32 m
// bytes apart: per call, alternating, same bits, at 512 rows Q6_K 8B down 1.12-1.30x, 1B down
// 1.14x, Q4_K 1.02-1.06x; at 32 and 128 rows 0.98-1.01x); else all rows block-major. (Float
// segments read the f32 rows, whatever the layout.)
int64_t act_slab_rows(const PackedWeight& w, int64_t m) {
  if (many_row_tiles(m)) return kChunkSlabRows;
  if (amx_tiles(m) && has_amx_form(w)) return kAmxTileRows;
  if (active_isa() == Isa::Avx512 && m > kMaxTileRows) return kMaxTileRows;
  return 0;
}

}  // namespace

ActScratch act_scratch(const PackedWeight& w, int64_t m) {
  ActScratch s{};
  s.end = kQueueBytes;
  if (!w.quantized()) return s;
  const size_t k = static_cast<size_t>(w.k()), mm = static_cast<size_t>(m);
  // Each array is followed by kActOverreadBytes that AMX tiles may read past its last row.
  constexpr size_t pad = kActOverreadBytes;
  s.q = s.end;
  s.d = s.q + align64(mm * k) + pad;
  s.s16 = s.d + align64(mm * (k / 32) * 4) + pad;
  s.s32 = s.s16 + align64(mm * (k / 16) * 4) + pad;
  s.ds = s.s32 + align64(mm * (k / 32) * 4) + pad;
  s.end = s.ds + align64(mm * (k / 32) * 4) + pad;
  bool seen[kZeroPointSlots] = {};
  for (const PackedSegment& seg : w.segments()) {
    const PackedLayout L = packed_layout(seg.dtype);
    if (L.is_float || L.has_min || L.zero_point == 0) continue;
    const int slot = zp_slot(L.zero_point);
    KILN_CHECK(slot >= 0, "matmul: no correction slot for zero point {}", L.zero_point);
    if (seen[slot]) continue;
    seen[slot] = true;
    s.corrections[s.n_corrections++] = {slot, L.zero_point, L.sub_block, s.end};
    s.end += align64(mm * (k / static_cast<size_t>(L.sub_block)) * 4) + pad;
  }
  // Sized wherever the host could run the bf16 contract, whether or not it does now, so that a
  // plan sized before the contract is switched stays large enough.
  if (bf16_contract_usable()) {
    s.xb = s.end;
    s.end += align64(bf16_rows(m) * k * 2);
  }
  return s;
}

bool many_row_tiles(int64_t m) { return active_isa() == Isa::Avx2 && m >= 2; }

bool amx_tiles(int64_t m) { return m >= kAmxMinRows && amx_active(); }

ActView prepare_acts(const PackedWeight& w, const float* x, int64_t m, void* scratch,
                     const ExecContext& ctx) {
  ActView a;
  a.k = w.k();
  a.x = x;
  a.x_stride = w.k();
  // Reset before the barrier below; no thread takes a group before it.
  if (ctx.tid == 0) group_counter(scratch).store(0, std::memory_order_relaxed);
  if (w.quantized() && bf16_contract_active()) {
    // The bf16 contract: the rows rounded to bf16, whole tiles of them (the padding rows zero).
    const ActScratch s = act_scratch(w, m);
    auto* xb = scratch_array<uint16_t>(scratch, s.xb);
    const int64_t k = w.k(), padded = static_cast<int64_t>(bf16_rows(m));
    const Range rows = split_range(padded, ctx.tid, ctx.nth);
    rows_to_bf16(x, k, m, rows.begin, rows.end, xb);
    a.m = m;
    a.xb = xb;
  } else if (w.quantized()) {
    const ActScratch s = act_scratch(w, m);
    auto* base = static_cast<uint8_t*>(scratch);
    auto* q = scratch_array<int8_t>(base, s.q);
    auto* d = scratch_array<float>(base, s.d);
    auto* s16 = scratch_array<int32_t>(base, s.s16);
    auto* s32 = scratch_array<int32_t>(base, s.s32);
    auto* ds = scratch_array<float>(base, s.ds);
    const int64_t k = w.k();
    QuantizeRowFn quantize = quantize_row_fn();
    Range rows = split_range(m, ctx.tid, ctx.nth);
    // Row i is row r of the block-major slab of `height` rows starting at row i0 (all m rows
    // when slab_rows is 0); each array holds the rows before that slab in full (see ActView).
    const int64_t slab_rows = act_slab_rows(w, m);
    auto place = [&](int64_t i, int64_t& i0, int64_t& r, int64_t& height) {
      i0 = slab_rows > 0 ? i - i % slab_rows : 0;
      r = i - i0;
      height = slab_rows > 0 ? std::min(slab_rows, m - i0) : m;
    };
    for (int64_t i = rows.begin; i < rows.end; ++i) {
      int64_t i0, r, h;
      place(i, i0, r, h);
      const int64_t at = i0 * (k / 32) + r;
      quantize(x + i * k, k, h, q + i0 * k + r * 32, d + at, s16 + i0 * (k / 16) + r, s32 + at,
               ds + at);
    }
    // Zero-point corrections for the segments' types (a merged weight may mix them).
    for (int c = 0; c < s.n_corrections; ++c) {
      const ActScratch::Correction& cr = s.corrections[c];
      auto* corr = scratch_array<int32_t>(base, cr.offset);
      const int32_t* sums = cr.sub_block == 32 ? s32 : s16;
      const int64_t nsub = k / cr.sub_block;
      for (int64_t i = rows.begin; i < rows.end; ++i) {
        int64_t i0, r, h;
        place(i, i0, r, h);
        for (int64_t b = 0; b < nsub; ++b) {
          const int64_t at = i0 * nsub + b * h + r;
          corr[at] = -cr.zero_point * sums[at];
        }
      }
      a.zp_corr[cr.slot] = corr;
    }
    a.m = m;
    a.slab_rows = slab_rows;
    a.q = q;
    a.d = d;
    a.s16 = s16;
    a.s32 = s32;
    a.ds = ds;
  }
  ctx.sync();
  return a;
}

}  // namespace kiln::kernels
