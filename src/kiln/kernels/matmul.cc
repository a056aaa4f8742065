#include "kiln/kernels/matmul.h"

#include <emmintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <utility>

#include "kiln/base/amx.h"
#include "kiln/base/cpu_features.h"
#include "kiln/base/error.h"
#include "kiln/kernels/matmul_acts.h"
#include "kiln/kernels/matmul_kernels.h"

namespace kiln::kernels {
namespace {

constexpr int R = PackedWeight::kGroupRows;

// RowsAboveFn with SSE2 (part of every x86-64 CPU): four compares per row.
uint64_t rows_above_sse2(const float* tile, int mt, const float* best) {
  static_assert(PackedWeight::kGroupRows == 16);
  uint64_t rows = 0;
  for (int i = 0; i < mt; ++i) {
    const float* t = tile + i * 16;
    const __m128 vb = _mm_set1_ps(best[i]);
    __m128 gt = _mm_cmpgt_ps(_mm_loadu_ps(t), vb);
    gt = _mm_or_ps(gt, _mm_cmpgt_ps(_mm_loadu_ps(t + 4), vb));
    gt = _mm_or_ps(gt, _mm_cmpgt_ps(_mm_loadu_ps(t + 8), vb));
    gt = _mm_or_ps(gt, _mm_cmpgt_ps(_mm_loadu_ps(t + 12), vb));
    if (_mm_movemask_ps(gt) != 0) rows |= uint64_t{1} << i;
  }
  return rows;
}

RowsAboveFn rows_above_fn() {
  return active_isa() == Isa::Avx512 ? rows_above_avx512 : rows_above_sse2;
}

TileFn tile_fn(DType t) {
  switch (active_isa()) {
    case Isa::Avx512:
      return tile_fn_avx512(t);
    case Isa::Avx2:
      return tile_fn_avx2(t);
    default:
      return tile_fn_scalar(t);
  }
}

void check_common(const PackedWeight& w, const float* x, int64_t m, void* scratch,
                  const ExecContext& ctx) {
  KILN_CHECK(w.n() > 0 && w.data() != nullptr, "matmul: empty weight");
  KILN_CHECK(m >= 0, "matmul: negative row count {}", m);
  KILN_CHECK(m == 0 || x != nullptr, "matmul: null input");
  KILN_CHECK(m == 0 || scratch != nullptr, "matmul: null scratch");
  KILN_CHECK(reinterpret_cast<uintptr_t>(scratch) % 4 == 0, "matmul: scratch must be 4-aligned");
  KILN_CHECK(ctx.nth >= 1 && ctx.tid >= 0 && ctx.tid < ctx.nth, "matmul: bad thread {} of {}",
             ctx.tid, ctx.nth);
}

// Hands out a matmul's column groups in chunks, in increasing order, from a counter its threads
// share. A thread that runs slower (a core shared with another VM or process, a preempted
// worker) takes fewer chunks instead of holding up the whole step, as an even static split
// would. A column's result does not depend on which thread computes it, so neither does the
// output. About 16 chunks per thread: a straggler's last chunk is a small part of the work,
// and claiming costs one atomic add per chunk. Chunks are even, so pair tiles fill them.
class GroupQueue {
 public:
  GroupQueue(void* scratch, int64_t groups, int nth)
      : counter_(group_counter(scratch)),
        groups_(groups),
        chunk_(std::max<int64_t>(2, (groups / (16 * nth) + 1) / 2 * 2)) {}
  // This thread's next chunk (the one peek() claimed, if any); false when none is left.
  bool next(Range& r) {
    if (!peeked_) return claim(r);
    peeked_ = false;
    r = ahead_;
    return have_ahead_;
  }
  // The first group of the chunk after the current one, claimed now (next() then returns it),
  // or -1 when none is left: where a tile's prefetch points when its own chunk runs out.
  int64_t peek() {
    if (!peeked_) have_ahead_ = claim(ahead_);
    peeked_ = true;
    return have_ahead_ ? ahead_.begin : -1;
  }

 private:
  bool claim(Range& r) {
    const int64_t begin =
        counter_.fetch_add(static_cast<int32_t>(chunk_), std::memory_order_relaxed);
    if (begin >= groups_) return false;
    r = {begin, std::min(begin + chunk_, groups_)};
    return true;
  }

  std::atomic_ref<int32_t> counter_;
  int64_t groups_;
  int64_t chunk_;
  Range ahead_{};
  bool peeked_ = false;
  bool have_ahead_ = false;
};

// Counted once per thread and matmul (a shared counter per group would bounce its cache line
// between the threads on the hot path).
std::atomic<int64_t> g_amx_matmuls{0};
std::atomic<int64_t> g_bf16_matmuls{0};

// What a tile starting at row i0 reads: `a` itself with row0 = i0 (all rows block-major, no
// copy: at one row this runs for every group), or the slab holding i0, built in `slab`, with
// i0's row in it.
const ActView& tile_view(const ActView& a, int64_t i0, ActView& slab, int64_t& row0) {
  if (a.slab_rows == 0) {
    row0 = i0;
    return a;
  }
  row0 = i0 % a.slab_rows;
  slab = a.slab(i0 - row0);
  return slab;
}

// Room for two expanded groups (a pair tile's), on the stack of the thread running the tiles
// (not TLS, which every thread of the process, HTTP workers included, would zero at creation).
// An expanded group takes 17-20 bytes per input, so this holds K up to ~9.8K inputs: the FFN
// down projections of 1.5B-3B models (K = 8960 in Qwen2.5 1.5B), which at 64 KiB were unpacked
// per row tile. On the Qwen2.5-Coder-1.5B file (Emerald Rapids, 2 threads, alternating rounds
// against the 64 KiB build): prefill of 24 x 48 tokens 1.06-1.08x in 5 of 6 rounds, of 4096
// tokens 1.02x, of 512 tokens within noise; at batch 28 the matmul_add kernels (o and down
// projections) take 0.89x the time (`kiln bench --op-profile`, 2 pairs of runs) and decode runs
// 1.03x. Larger groups (K = 14336 in 8B models) are still unpacked per row tile. 384 KiB of
// stack against threads' 8 MiB.
constexpr size_t kExpandBytes = 192 * 1024;

// How one segment's groups are computed for m rows.
struct SegmentKernels {
  TileFn tile = nullptr;            // one group, up to kMaxTileRows rows
  PairTileFn pair = nullptr;        // two groups at once (null: one at a time)
  ExpandedTiles ex;                 // expand == null: groups are read as packed
  AmxTiles amx;                     // AMX tiles of 16 rows on the (expanded) records
  int64_t records = 0;              // sub-block records per group (quantized types)
  ChunkTiles chunk;                 // tile != null: AVX2 many-row tiles (chunked_group)
  Bf16DecompressFn bf16 = nullptr;  // the bf16 contract's tiles (bf16_group)
  int64_t records_per_step = 0;     // bf16: records per 32-input step
};

// AVX2 where many_row_tiles says: the many-row tiles (chunked_group).
// AVX-512 above kMaxTileRows rows, where a group is read by several row tiles: 8-bit records go
// to the pair kernel, and other types are first unpacked to 8-bit records when a group fits the
// buffer. Up to kMaxTileRows rows one 8-row tile reads each group once, straight from memory
// (pairs of 4-row tiles measured slower there: each group is read twice, once from DRAM).
SegmentKernels kernels_for(const PackedWeight& w, DType t, int64_t m, bool bf16) {
  const int64_t k = w.k();
  SegmentKernels s;
  s.tile = tile_fn(t);
  if (bf16) {
    // Every quantized format has the bf16 form (float segments keep their f32 tiles).
    s.bf16 = bf16_decompress_fn(t);
    if (s.bf16 != nullptr) {
      s.records_per_step = 32 / packed_layout(t).sub_block;
      return s;
    }
  }
  if (many_row_tiles(m)) {
    s.chunk = chunk_tiles_avx2(t);
    // The activations are in slabs (act_slab_rows), which only these tiles and the f32 rows
    // of float weights read.
    KILN_CHECK(s.chunk.tile != nullptr || packed_layout(t).is_float,
               "matmul: no AVX2 many-row tiles for {} weights", dtype_name(t));
    return s;
  }
  if (m <= kMaxTileRows) return s;
  if (active_isa() != Isa::Avx512) return s;
  // AMX reads the records the pair kernels read (as stored or expanded), one group at a time.
  // (With AMX tiles the activations are in 16-row slabs: act_slab_rows.)
  const AmxTiles amx = amx_tiles(m) ? amx_tiles_for(t) : AmxTiles{};
  s.pair = pair_tile_fn_avx512(t);
  if (s.pair != nullptr) {
    s.records = k / packed_layout(t).sub_block;
    s.amx = amx;
    return s;
  }
  ExpandedTiles e = expanded_tiles_avx512(t);
  if (e.expand != nullptr &&
      static_cast<size_t>(k / e.sub_block) * e.record_bytes <= kExpandBytes) {
    s.ex = e;
    s.pair = e.pair;
    s.records = k / e.sub_block;
    s.amx = amx;
  }
  return s;
}

// What row tile `tile_index` of a pair pulls into L2: an equal share of the next pair's bytes
// (`next_pair`, both groups), spread over its records. Empty when there is no next pair.
TilePrefetch pair_tile_prefetch(const uint8_t* next_pair, size_t bytes, int64_t records,
                                int64_t row_tiles, int64_t tile_index) {
  if (next_pair == nullptr) return {};
  const auto share = static_cast<int64_t>(align64((bytes + row_tiles - 1) / row_tiles));
  const uint8_t* end = next_pair + bytes;
  TilePrefetch p;
  p.begin = std::min(end, next_pair + tile_index * share);
  p.end = std::min(end, p.begin + share);
  p.per_record = static_cast<int64_t>(align64((share + records - 1) / records));
  return p;
}

// The bytes of groups g and g + 1 (the segment of g is searched forward from `from`), clamped
// to the weight: what a pair tile prefetches for the pair after it.
std::pair<const uint8_t*, size_t> pair_bytes(const PackedWeight& w, int64_t g, size_t from) {
  const auto& segs = w.segments();
  while (g >= segs[from].group0 + segs[from].groups) ++from;
  const PackedSegment& seg = segs[from];
  const uint8_t* at = w.data() + seg.offset + (g - seg.group0) * seg.group_bytes;
  const size_t left = static_cast<size_t>(w.data() + w.bytes() - at);
  return {at, std::min(2 * seg.group_bytes, left)};
}

// Rows whose f32 accumulators one pass of chunked_group keeps (in a 4 KiB tile on the stack).
constexpr int64_t kChunkBlockRows = 64;
static_assert(kChunkBlockRows % kChunkSlabRows == 0, "a row block is whole slabs");

// One group for all m rows with the AVX2 many-row tiles: records are taken in chunks of at most
// buffer_bytes expanded (the whole group at once when it fits), and every row of a block of
// kChunkBlockRows rows adds each chunk to its accumulators while the chunk is in cache. The first
// slab reads the chunk packed and expands it into `buffer` for the others (ChunkTiles::first). A
// whole group stays expanded for every later block of rows; a group larger than the buffer is
// expanded again per block of rows: a few vector instructions per record, against
// kChunkBlockRows rows of dot products.
template <typename Epilogue>
void chunked_group(const ChunkTiles& ct, const uint8_t* group, const ActView& a, int64_t m,
                   int64_t col, int valid, uint8_t* buffer, size_t buffer_bytes, Epilogue& epi) {
  const int64_t records = a.k / ct.sub_block;
  const int64_t per_chunk =
      ct.expanded ? std::max<int64_t>(1, static_cast<int64_t>(buffer_bytes / ct.record_bytes))
                  : records;
  const bool whole = per_chunk >= records;
  alignas(64) float acc[kChunkBlockRows * R];
  for (int64_t r0 = 0; r0 < m; r0 += kChunkBlockRows) {
    const int rows = static_cast<int>(std::min(kChunkBlockRows, m - r0));
    std::fill_n(acc, rows * R, 0.0f);
    for (int64_t s0 = 0; s0 < records; s0 += per_chunk) {
      const int64_t s1 = std::min(records, s0 + per_chunk);
      const uint8_t* recs =
          ct.expanded ? buffer : group + s0 * static_cast<int64_t>(ct.record_bytes);
      const bool expand = r0 == 0 || !whole;  // else the buffer holds the whole group already
      for (int64_t i0 = r0; i0 < r0 + rows; i0 += a.slab_rows) {
        const ActView slab = a.slab(i0);
        const int mt = static_cast<int>(slab.m);
        float* slab_acc = acc + (i0 - r0) * R;
        if (i0 == r0 && expand) {
          ct.first(group, a.k, slab, s0, s1, 0, mt, slab_acc, buffer);
        } else {
          ct.tile(recs, slab, s0, s1, 0, mt, slab_acc);
        }
      }
    }
    epi(col, valid, r0, rows, acc);
  }
}

// One group for all m rows under the bf16 contract: up to kBf16MaxTiles tiles of 16 rows at a
// time accumulate every 32-input step in the tile registers, the group's records decompressed
// into `buffer` once for all rows where the whole group fits it (12288 inputs in the pair
// tiles' buffer), else chunk by chunk again for each pass of rows.
constexpr int64_t kBf16DecompressSlice = 4;

// Steps [t0, t1) in slices: each slice decompressed, then the slice before it multiplied, so
// that the tile loads read decompressed weights whose stores have long left the store buffer
// while the tile unit works through one slice and the vector units decompress the next.
template <class Decompress, class Multiply>
void pipelined_slices(int64_t t0, int64_t t1, Decompress&& decompress, Multiply&& multiply) {
  int64_t prev0 = -1, prev1 = -1;
  for (int64_t u0 = t0; u0 < t1; u0 += kBf16DecompressSlice) {
    const int64_t u1 = std::min(t1, u0 + kBf16DecompressSlice);
    decompress(u0, u1);
    if (prev0 >= 0) multiply(prev0, prev1);
    prev0 = u0;
    prev1 = u1;
  }
  if (prev0 >= 0) multiply(prev0, prev1);
}

template <typename Epilogue>
void bf16_group(const SegmentKernels& kern, const uint8_t* group, const ActView& a, int64_t m,
                int64_t col, int valid, uint8_t* buffer, size_t buffer_bytes, Epilogue& epi) {
  const int64_t steps = a.k / 32;
  const int64_t per_chunk =
      std::min<int64_t>(steps, static_cast<int64_t>(buffer_bytes) / kBf16StepBytes);
  const bool whole = per_chunk >= steps;
  auto* b = static_cast<uint16_t*>(static_cast<void*>(buffer));
  alignas(64) float c[kBf16MaxTiles * 16 * R];
  constexpr int64_t kPassRows = kBf16MaxTiles * 16;
  for (int64_t r0 = 0; r0 < m; r0 += kPassRows) {
    const int nt = static_cast<int>((std::min(kPassRows, m - r0) + 15) / 16);
    bf16_tiles_zero(nt);
    for (int64_t t0 = 0; t0 < steps; t0 += per_chunk) {
      const int64_t t1 = std::min(steps, t0 + per_chunk);
      // Row tile r0 / 16's steps u0 .. u1 (A tiles: rows_to_bf16).
      auto multiply = [&](int64_t u0, int64_t u1) {
        bf16_tiles_accumulate(b + (u0 - t0) * kBf16TileElems,
                              a.xb + (r0 / 16 * steps + u0) * kBf16TileElems,
                              steps * kBf16TileElems, u1 - u0, nt);
      };
      if (r0 == 0 || !whole) {
        pipelined_slices(
            t0, t1,
            [&](int64_t u0, int64_t u1) {
              kern.bf16(group, a.k, u0 * kern.records_per_step, u1 * kern.records_per_step,
                        b + (u0 - t0) * kBf16TileElems);
            },
            multiply);
      } else {
        multiply(t0, t1);
      }
    }
    bf16_tiles_store(nt, c);
    for (int i = 0; i < nt; ++i) {
      const int64_t i0 = r0 + 16 * i;
      epi(col, valid, i0, static_cast<int>(std::min<int64_t>(16, m - i0)), c + i * 16 * R);
    }
  }
}

// Two groups at once under the bf16 contract, each A tile feeding both (the pair tiles), in
// passes of 32 rows; only where both whole groups fit `buffer` (6144 inputs in the pair tiles'
// buffer), decompressed in the first pass. The same steps in the same order per output
// as bf16_group, so the same bits.
template <typename Epilogue>
void bf16_pair(const SegmentKernels& kern, const uint8_t* group0, const uint8_t* group1,
               const ActView& a, int64_t m, int64_t col, int valid0, int valid1, uint8_t* buffer,
               Epilogue& epi) {
  const int64_t steps = a.k / 32;
  auto* b0 = static_cast<uint16_t*>(static_cast<void*>(buffer));
  uint16_t* b1 = b0 + steps * kBf16TileElems;
  alignas(64) float c[kBf16MaxTiles * 16 * R];
  for (int64_t r0 = 0; r0 < m; r0 += 32) {
    const int nr = m - r0 > 16 ? 2 : 1;
    bf16_tiles_zero(2 * nr);
    auto multiply = [&](int64_t u0, int64_t u1) {
      const int64_t at = u0 * kBf16TileElems;
      bf16_tiles_accumulate_pair(b0 + at, b1 + at, a.xb + (r0 / 16 * steps + u0) * kBf16TileElems,
                                 steps * kBf16TileElems, u1 - u0, nr);
    };
    if (r0 == 0) {
      pipelined_slices(
          0, steps,
          [&](int64_t u0, int64_t u1) {
            const int64_t s0 = u0 * kern.records_per_step, s1 = u1 * kern.records_per_step;
            kern.bf16(group0, a.k, s0, s1, b0 + u0 * kBf16TileElems);
            kern.bf16(group1, a.k, s0, s1, b1 + u0 * kBf16TileElems);
          },
          multiply);
    } else {
      multiply(0, steps);
    }
    bf16_tiles_store(2 * nr, c);
    for (int r = 0; r < nr; ++r) {
      const int64_t i0 = r0 + 16 * r;
      const int rows = static_cast<int>(std::min<int64_t>(16, m - i0));
      epi(col, valid0, i0, rows, c + (2 * r) * 16 * R);
      epi(col + R, valid1, i0, rows, c + (2 * r + 1) * 16 * R);
    }
  }
}

// Phase 2: the column groups this thread takes from the queue; epi(col, valid_cols, row0, mt,
// tile) consumes each tile, columns in increasing order for every row.
template <typename Epilogue>
void for_each_tile(const PackedWeight& w, const ActView& a, int64_t m, void* scratch,
                   const ExecContext& ctx, Epilogue&& epi) {
  GroupQueue queue(scratch, w.groups(), ctx.nth);
  const auto& segs = w.segments();
  size_t si = 0;  // chunks come in increasing order, so segments are only searched forward
  SegmentKernels kern;
  alignas(64) float tile[2][std::max(kMaxTileRows, kAmxTileRows) * R];
  ActView slab;  // the slab a tile reads, where the activations are in slabs (tile_view)
  bool ran_amx = false, ran_bf16 = false;
  // Untouched unless a group is expanded: two groups of kExpandBytes for a pair tile, or one
  // chunk of up to kChunkBufferBytes for chunked_group.
  alignas(64) uint8_t expand_buffer[std::max(2 * kExpandBytes, kChunkBufferBytes)];
  for (Range chunk; queue.next(chunk);) {
    for (int64_t g = chunk.begin; g < chunk.end;) {
      while (g >= segs[si].group0 + segs[si].groups) {
        ++si;
        kern.tile = nullptr;
      }
      const PackedSegment& seg = segs[si];
      if (kern.tile == nullptr) kern = kernels_for(w, seg.dtype, m, a.xb != nullptr);
      const int64_t local = g - seg.group0;
      const uint8_t* group[2] = {w.data() + seg.offset + local * seg.group_bytes, nullptr};
      const int64_t col = seg.col0 + local * R;
      auto valid = [&](int64_t l) { return static_cast<int>(std::min<int64_t>(R, seg.n - l * R)); };
      if (kern.bf16 != nullptr) {
        ran_bf16 = true;
        const bool pair = g + 1 < chunk.end && local + 1 < seg.groups &&
                          2 * (w.k() / 32) * kBf16StepBytes <= int64_t{sizeof(expand_buffer)};
        if (pair) {
          bf16_pair(kern, group[0], group[0] + seg.group_bytes, a, m, col, valid(local),
                    valid(local + 1), expand_buffer, epi);
          g += 2;
        } else {
          bf16_group(kern, group[0], a, m, col, valid(local), expand_buffer, sizeof(expand_buffer),
                     epi);
          ++g;
        }
        continue;
      }
      if (kern.chunk.tile != nullptr) {
        chunked_group(kern.chunk, group[0], a, m, col, valid(local), expand_buffer,
                      sizeof(expand_buffer), epi);
        ++g;
        continue;
      }
      if (kern.amx.rest != nullptr) {
        const uint8_t* records = group[0];
        if (kern.ex.expand != nullptr) {  // unpack once for all row tiles
          (kern.amx.signed_codes ? kern.ex.expand_signed : kern.ex.expand)(group[0], w.k(),
                                                                           expand_buffer);
          records = expand_buffer;
        }
        ran_amx = true;
        for (int64_t i0 = 0; i0 < m; i0 += kAmxTileRows) {
          const int mt = static_cast<int>(std::min<int64_t>(kAmxTileRows, m - i0));
          int64_t row0;
          const ActView& view = tile_view(a, i0, slab, row0);
          (i0 == 0 ? kern.amx.first : kern.amx.rest)(records, view, row0, mt, tile[0]);
          epi(col, valid(local), i0, mt, tile[0]);
        }
        ++g;
        continue;
      }
      // Pairs stay within the chunk and one segment (one record format).
      const int n_groups =
          kern.pair != nullptr && g + 1 < chunk.end && local + 1 < seg.groups ? 2 : 1;
      if (n_groups == 2) group[1] = group[0] + seg.group_bytes;
      if (kern.ex.expand != nullptr) {  // unpack once for all row tiles
        for (int h = 0; h < n_groups; ++h) {
          uint8_t* out = expand_buffer + h * kExpandBytes;
          kern.ex.expand(group[h], w.k(), out);
          group[h] = out;
        }
      }
      if (n_groups == 2) {
        // The two groups this thread computes next: later in this chunk, or the first of the
        // next one, claimed now so that its bytes are on their way while this pair computes.
        const int64_t next_g = g + 2 < chunk.end ? g + 2 : queue.peek();
        const auto [next, next_bytes] =
            next_g >= 0 ? pair_bytes(w, next_g, si) : std::pair<const uint8_t*, size_t>{};
        const int64_t row_tiles = (m + kPairTileRows - 1) / kPairTileRows;
        for (int64_t i0 = 0; i0 < m; i0 += kPairTileRows) {
          const int mt = static_cast<int>(std::min<int64_t>(kPairTileRows, m - i0));
          const TilePrefetch pf =
              pair_tile_prefetch(next, next_bytes, kern.records, row_tiles, i0 / kPairTileRows);
          int64_t row0;
          const ActView& view = tile_view(a, i0, slab, row0);
          kern.pair(group[0], group[1], view, row0, mt, pf, tile[0], tile[1]);
          epi(col, valid(local), i0, mt, tile[0]);
          epi(col + R, valid(local + 1), i0, mt, tile[1]);
        }
      } else {
        const TileFn run = kern.ex.expand != nullptr ? kern.ex.tile : kern.tile;
        for (int64_t i0 = 0; i0 < m; i0 += kMaxTileRows) {
          const int mt = static_cast<int>(std::min<int64_t>(kMaxTileRows, m - i0));
          int64_t row0;
          const ActView& view = tile_view(a, i0, slab, row0);
          run(group[0], view, row0, mt, tile[0]);
          epi(col, valid(local), i0, mt, tile[0]);
        }
      }
      g += n_groups;
    }
  }
  if (ran_amx) g_amx_matmuls.fetch_add(1, std::memory_order_relaxed);
  if (ran_bf16) g_bf16_matmuls.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

int64_t amx_matmuls_run() { return g_amx_matmuls.load(std::memory_order_relaxed); }
int64_t bf16_matmuls_run() { return g_bf16_matmuls.load(std::memory_order_relaxed); }

size_t matmul_scratch_bytes(const PackedWeight& w, int64_t m) {
  KILN_CHECK(m >= 0, "matmul: negative row count {}", m);
  return act_scratch(w, m).end;
}

void matmul(const PackedWeight& w, const float* x, int64_t m, float* y, const float* residual,
            void* scratch, const ExecContext& ctx) {
  check_common(w, x, m, scratch, ctx);
  KILN_CHECK(m == 0 || y != nullptr, "matmul: null output");
  if (m == 0) return;
  ActView a = prepare_acts(w, x, m, scratch, ctx);
  const int64_t n = w.n();
  for_each_tile(w, a, m, scratch, ctx,
                [&](int64_t col, int nv, int64_t i0, int mt, const float* tile) {
                  for (int i = 0; i < mt; ++i) {
                    float* yr = y + (i0 + i) * n + col;
                    const float* t = tile + i * R;
                    if (residual != nullptr) {
                      const float* rr = residual + (i0 + i) * n + col;
                      for (int c = 0; c < nv; ++c) yr[c] = t[c] + rr[c];
                    } else {
                      for (int c = 0; c < nv; ++c) yr[c] = t[c];
                    }
                  }
                });
}

void matmul_split(const PackedWeight& w, const float* x, int64_t m, float* const* outs,
                  const int64_t* split_cols, int n_splits, void* scratch, const ExecContext& ctx) {
  check_common(w, x, m, scratch, ctx);
  KILN_CHECK(n_splits >= 1 && outs != nullptr && split_cols != nullptr, "matmul_split: no outputs");
  int64_t total = 0;
  for (int s = 0; s < n_splits; ++s) {
    KILN_CHECK(split_cols[s] >= 0, "matmul_split: negative split {}", split_cols[s]);
    KILN_CHECK(m == 0 || split_cols[s] == 0 || outs[s] != nullptr, "matmul_split: null output {}",
               s);
    total += split_cols[s];
  }
  KILN_CHECK(total == w.n(), "matmul_split: splits cover {} columns, the weight has {}", total,
             w.n());
  if (m == 0) return;
  ActView a = prepare_acts(w, x, m, scratch, ctx);
  for_each_tile(w, a, m, scratch, ctx,
                [&](int64_t col, int nv, int64_t i0, int mt, const float* tile) {
                  // Find the split holding `col`; a group may straddle split boundaries.
                  int s = 0;
                  int64_t start = 0;
                  while (col >= start + split_cols[s]) start += split_cols[s++];
                  if (col + nv <= start + split_cols[s]) {
                    // The whole tile in one split (always, when splits are multiples of 16
                    // columns): row by row, as matmul stores it.
                    const int64_t width = split_cols[s];
                    float* out = outs[s] + i0 * width + (col - start);
                    if (nv == R) {
                      // A fixed-size copy is inlined (a call to memmove per row cost 1.6% of
                      // a batch-32 decode step of the default model).
                      for (int i = 0; i < mt; ++i)
                        std::memcpy(out + i * width, tile + i * R, R * sizeof(float));
                    } else {
                      for (int i = 0; i < mt; ++i) std::copy_n(tile + i * R, nv, out + i * width);
                    }
                    return;
                  }
                  for (int c = 0; c < nv; ++c) {
                    while (col + c >= start + split_cols[s]) start += split_cols[s++];
                    const int64_t width = split_cols[s], lc = col + c - start;
                    for (int i = 0; i < mt; ++i) outs[s][(i0 + i) * width + lc] = tile[i * R + c];
                  }
                });
}

size_t matmul_argmax_scratch_bytes(const PackedWeight& w, int64_t m, int nth) {
  KILN_CHECK(m >= 0 && nth >= 1, "matmul_argmax: bad rows {} / threads {}", m, nth);
  return act_scratch(w, m).end + align64(static_cast<size_t>(nth) * m * 8);
}

void matmul_argmax(const PackedWeight& w, const float* x, int64_t m, int32_t* out_ids,
                   void* scratch, const ExecContext& ctx) {
  check_common(w, x, m, scratch, ctx);
  KILN_CHECK(m == 0 || out_ids != nullptr, "matmul_argmax: null output");
  KILN_CHECK(m == 0 || scratch != nullptr, "matmul_argmax: null scratch");
  if (m == 0) return;
  ActView a = prepare_acts(w, x, m, scratch, ctx);
  // Per-thread partial results: [nth][m] (value, column), column -1 when none yet.
  auto* base = static_cast<uint8_t*>(scratch) + act_scratch(w, m).end;
  auto* best = scratch_array<float>(base, 0);
  auto* where = scratch_array<int32_t>(base, static_cast<size_t>(ctx.nth) * m * 4);
  float* my_best = best + ctx.tid * m;
  int32_t* my_where = where + ctx.tid * m;
  for (int64_t i = 0; i < m; ++i) {
    my_best[i] = -std::numeric_limits<float>::infinity();
    my_where[i] = -1;
  }
  // Tiles reach the epilogue with at most kMaxTileRows rows, kAmxTileRows on AMX, or
  // kChunkBlockRows on the AVX2 many-row path: each fits the scan's 64-bit row mask.
  static_assert(kMaxTileRows <= 64 && kAmxTileRows <= 64 && kChunkBlockRows <= 64);
  const RowsAboveFn rows_above = rows_above_fn();
  for_each_tile(
      w, a, m, scratch, ctx, [&](int64_t col, int nv, int64_t i0, int mt, const float* tile) {
        // Almost every tile row holds nothing above the running best: such rows are
        // skipped after one vector compare each (NaN compares false, as in the loop
        // below, which decides everything else).
        const uint64_t above = nv == R ? rows_above(tile, mt, my_best + i0) : ~uint64_t{0};
        for (int i = 0; i < mt; ++i) {
          float b = my_best[i0 + i];
          int32_t at = my_where[i0 + i];
          const float* t = tile + i * R;
          if (at >= 0 && ((above >> i) & 1) == 0) continue;
          for (int c = 0; c < nv; ++c) {
            // Strictly greater: columns are visited in increasing order, so ties keep the
            // lowest.
            if (t[c] > b || (at < 0 && t[c] == b)) {
              b = t[c];
              at = static_cast<int32_t>(col + c);
            }
          }
          my_best[i0 + i] = b;
          my_where[i0 + i] = at;
        }
      });
  ctx.sync();
  // Merge: the greatest value, ties to the lowest column (each thread's own columns were
  // visited in increasing order, but threads took chunks from the queue in any interleaving).
  Range rows = split_range(m, ctx.tid, ctx.nth);
  for (int64_t i = rows.begin; i < rows.end; ++i) {
    float b = -std::numeric_limits<float>::infinity();
    int32_t at = -1;
    for (int t = 0; t < ctx.nth; ++t) {
      float v = best[t * m + i];
      int32_t c = where[t * m + i];
      if (c >= 0 && (at < 0 || v > b || (v == b && c < at))) {
        b = v;
        at = c;
      }
    }
    out_ids[i] = at < 0 ? 0 : at;
  }
}

}  // namespace kiln::kernels
