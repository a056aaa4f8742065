// Attention: the work list, host-side planning (validation, tiling, split-K), the run loop,
// and the scalar instance of the item code.
#include "kiln/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/attention_isa.h"
#include "kiln/kernels/dispatch.h"

namespace kiln::kernels {
namespace {

// The scalar "vector" of one lane, so the scalar path runs the same algorithm as the AVX ones.
struct Scalar1 {
  using F = float;
  static constexpr int W = 1;
  static F zero() { return 0.0f; }
  static F set1(float v) { return v; }
  static F load(const float* p) { return *p; }
  static F load_n(const float* p, int n) { return n > 0 ? *p : 0.0f; }
  static void store(float* p, F v) { *p = v; }
  static void store_n(float* p, F v, int n) {
    if (n > 0) *p = v;
  }
  static F load_f16(const uint16_t* p) { return f16_to_f32(*p); }
  static F load_i8(const int8_t* p) { return static_cast<float>(*p); }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F mul(F a, F b) { return a * b; }
  static F fma(F a, F b, F c) { return a * b + c; }
  static F max(F a, F b) { return a > b ? a : b; }  // b when either is NaN, like maxps
  static float hsum(F v) { return v; }
  static F reduce_lanes(const F* v) { return v[0]; }
  static float hmax(F v) { return v; }
  static F exp(F x) { return std::exp(x); }
  static F tanh(F x) { return std::tanh(x); }
};

}  // namespace
}  // namespace kiln::kernels

#include "kiln/kernels/attention_simd.h"

namespace kiln::kernels {
namespace detail {
constinit const AttentionFns kAttentionScalar = AttentionSimd<Scalar1>::table();
}  // namespace detail

namespace {

void check_params(const AttentionParams& p) {
  KILN_CHECK(p.n_heads > 0 && p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0,
             "attention: n_heads {} must be a positive multiple of n_kv_heads {}", p.n_heads,
             p.n_kv_heads);
  KILN_CHECK(p.n_heads / p.n_kv_heads <= 64, "attention: GQA group {} > 64 unsupported",
             p.n_heads / p.n_kv_heads);
  KILN_CHECK(p.head_dim > 0 && p.head_dim % 2 == 0 && p.head_dim <= kAttnMaxHeadDim,
             "attention: head_dim {} must be even and <= {}", p.head_dim, kAttnMaxHeadDim);
  KILN_CHECK(p.max_pages_per_seq > 0, "attention: max_pages_per_seq must be > 0");
  KILN_CHECK(p.window >= 0, "attention: window must be >= 0, got {}", p.window);
  KILN_CHECK(std::isfinite(p.scale), "attention: scale must be finite");
  KILN_CHECK(std::isfinite(p.softcap) && p.softcap >= 0.0f,
             "attention: softcap must be finite and >= 0 (0 = none), got {}", p.softcap);
}

void check_limits(const AttentionLimits& l) {
  KILN_CHECK(l.max_tokens >= 1 && l.max_tokens <= std::numeric_limits<int32_t>::max(),
             "attention: max_tokens {} out of range", l.max_tokens);
  KILN_CHECK(l.max_threads >= 1, "attention: max_threads must be >= 1");
  KILN_CHECK(l.max_split_partials >= 0, "attention: max_split_partials must be >= 0");
}

struct ScratchLayout {
  size_t run_ml = 0, partials = 0, ws = 0, total = 0;  // byte offsets
};

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

ScratchLayout layout(const AttentionParams& p, const AttentionLimits& l) {
  ScratchLayout s;
  size_t f = sizeof(float);
  s.run_ml = 0;
  s.partials = align64(static_cast<size_t>(l.max_tokens) * p.n_heads * 2 * f);
  s.ws = s.partials + align64(static_cast<size_t>(l.max_split_partials) *
                              detail::attn_partial_stride(p.head_dim) * f);
  s.total = s.ws + static_cast<size_t>(l.max_threads) * detail::attn_ws_floats(p) * f;
  return s;
}

// The vector paths need head_dim in whole 16-lane vectors; other sizes take the scalar path.
const detail::AttentionFns& fns(const AttentionParams& p) {
  if (p.head_dim % 16 != 0) return detail::kAttentionScalar;
  return detail::pick_isa(detail::kAttentionScalar, detail::kAttentionAvx2,
                          detail::kAttentionAvx512);
}

}  // namespace

AttentionWork::AttentionWork(const AttentionParams& params, const AttentionLimits& limits)
    : limits_(limits) {
  check_params(params);
  check_limits(limits);
  size_t T = static_cast<size_t>(limits.max_tokens);
  row_lo.resize(T);
  row_hi.resize(T);
  tiles.resize(T);
  // One item per tile and KV head, plus at most one extra item per stored chunk partial, plus
  // one per thread for splitting GQA groups when there are fewer items than threads.
  items.resize(T * params.n_kv_heads + static_cast<size_t>(limits.max_split_partials) +
               static_cast<size_t>(limits.max_threads));
  merges.resize(T);
  inert.resize(T);
}

size_t attention_scratch_bytes(const AttentionParams& params, const AttentionLimits& limits) {
  check_params(params);
  check_limits(limits);
  return layout(params, limits).total;
}

void attention_plan(const AttentionParams& p, const AttentionInputs& in, int nth,
                    AttentionWork* work) {
  check_params(p);
  KILN_CHECK(work != nullptr, "attention_plan: null work");
  AttentionWork& w = *work;
  const AttentionLimits& lim = w.limits_;
  KILN_CHECK(nth >= 1 && nth <= lim.max_threads, "attention_plan: nth {} not in [1, {}]", nth,
             lim.max_threads);
  KILN_CHECK(in.T >= 0 && in.T <= lim.max_tokens, "attention_plan: T={} exceeds max_tokens {}",
             in.T, lim.max_tokens);
  check_kv_view(in.kv);
  KILN_CHECK(in.kv.n_kv_heads == p.n_kv_heads && in.kv.head_dim == p.head_dim,
             "attention_plan: KV view has {} heads x {} dims, params say {} x {}", in.kv.n_kv_heads,
             in.kv.head_dim, p.n_kv_heads, p.head_dim);
  KILN_CHECK(in.T == 0 || (in.q != nullptr && in.out != nullptr && in.positions != nullptr &&
                           in.token_seq != nullptr),
             "attention_plan: null input");
  KILN_CHECK(in.q != in.out || in.T == 0, "attention_plan: out must not alias q");
  const int G = p.n_heads / p.n_kv_heads;
  const int ps = in.kv.page_size;
  const int64_t max_keys = static_cast<int64_t>(p.max_pages_per_seq) * ps;

  // Rows: validate, key ranges, inert list.
  w.n_inert_ = 0;
  for (int64_t t = 0; t < in.T; ++t) {
    int32_t s = in.token_seq[t];
    if (s < 0) {
      w.inert[w.n_inert_++] = static_cast<int32_t>(t);
      continue;
    }
    KILN_CHECK(s < in.S, "attention_plan: row {} names sequence {} of {}", t, s, in.S);
    int32_t pos = in.positions[t];
    int32_t len = in.seq_lens[s];
    KILN_CHECK(len >= 0 && len <= max_keys,
               "attention_plan: seq_len {} of sequence {} outside [0, {}]", len, s, max_keys);
    KILN_CHECK(pos >= 0 && pos < len,
               "attention_plan: row {} at position {} but sequence {} has {} keys", t, pos, s, len);
    w.row_hi[t] = pos + 1;
    w.row_lo[t] = p.window > 0 ? std::max(0, pos - p.window + 1) : 0;
  }

  // Tiles of consecutive rows of one sequence; check the pages each tile will read.
  w.n_tiles_ = 0;
  int64_t total_cost = 0;
  for (int64_t t = 0; t < in.T;) {
    if (in.token_seq[t] < 0) {
      ++t;
      continue;
    }
    AttentionWork::Tile tile;
    tile.row0 = static_cast<int32_t>(t);
    tile.seq = in.token_seq[t];
    int32_t lo = w.row_lo[t], hi = w.row_hi[t];
    int64_t e = t + 1;
    while (e < in.T && e - t < kAttnTileRows && in.token_seq[e] == tile.seq) {
      lo = std::min(lo, w.row_lo[e]);
      hi = std::max(hi, w.row_hi[e]);
      ++e;
    }
    tile.rows = static_cast<int32_t>(e - t);
    tile.chunk_begin = lo / kAttnChunk;
    tile.chunk_end = (hi - 1) / kAttnChunk + 1;
    tile.split_chunk = tile.chunk_end;
    tile.partial_base = 0;
    const int32_t* bt = in.block_table + static_cast<int64_t>(tile.seq) * p.max_pages_per_seq;
    for (int32_t pg = lo / ps; pg <= (hi - 1) / ps; ++pg)
      KILN_CHECK(bt[pg] >= 0 && bt[pg] < in.kv.n_pages,
                 "attention_plan: sequence {} page {} maps to page id {} outside the pool ({})",
                 tile.seq, pg, bt[pg], in.kv.n_pages);
    w.tiles[w.n_tiles_++] = tile;
    total_cost += static_cast<int64_t>(tile.chunk_end - tile.chunk_begin) * (tile.rows * G + 4);
    t = e;
  }
  total_cost *= p.n_kv_heads;

  // Items. A tile whose cost is well above an even share of (nth * 4) items is cut into
  // segments of consecutive chunks; the first segment folds as it goes, later ones store
  // their partials for the merge phase. Splitting never changes results, only balance.
  w.n_items_ = 0;
  w.n_merges_ = 0;
  int64_t partials_used = 0;
  const int64_t target = nth > 1 ? std::max<int64_t>(1, total_cost / (4 * nth)) : 0;
  for (int64_t ti = 0; ti < w.n_tiles_; ++ti) {
    AttentionWork::Tile& tile = w.tiles[ti];
    const int32_t n_chunks = tile.chunk_end - tile.chunk_begin;
    const int64_t nq = static_cast<int64_t>(tile.rows) * G;
    const int64_t cost_per_chunk = nq + 4;
    int32_t seg = n_chunks;
    if (target > 0 && n_chunks > 1 && n_chunks * cost_per_chunk > target) {
      int64_t want = (n_chunks * cost_per_chunk + target - 1) / target;
      int32_t n_seg = static_cast<int32_t>(std::min<int64_t>(want, n_chunks));
      int32_t len = (n_chunks + n_seg - 1) / n_seg;
      int64_t need = static_cast<int64_t>(n_chunks - len) * nq * p.n_kv_heads;
      if (partials_used + need <= lim.max_split_partials) {
        seg = len;
        tile.split_chunk = tile.chunk_begin + len;
        tile.partial_base = partials_used;
        partials_used += need;
        w.merges[w.n_merges_++] = static_cast<int32_t>(ti);
      }
    }
    for (int32_t kvh = 0; kvh < p.n_kv_heads; ++kvh) {
      for (int32_t c = tile.chunk_begin; c < tile.chunk_end; c += seg) {
        AttentionWork::Item& it = w.items[w.n_items_++];
        it.tile = static_cast<int32_t>(ti);
        it.kv_head = kvh;
        it.chunk_begin = c;
        it.chunk_end = std::min(c + seg, tile.chunk_end);
        it.q_begin = 0;  // the work list is reused: reset what a split may have set
        it.q_end = -1;
        it.cost = (it.chunk_end - it.chunk_begin) * cost_per_chunk;
      }
    }
  }
  // Fewer items than threads (one short sequence): split the query heads of a GQA group
  // across items so no thread idles. Every (row, head) still goes through exactly the same
  // operations (scores, softmax and P*V are per query), only on another thread; both halves
  // convert the same keys, which is cheap next to an idle core.
  const int64_t n_whole = w.n_items_;
  for (int64_t i = 0; i < n_whole && w.n_items_ < nth; ++i) {
    AttentionWork::Item& it = w.items[i];
    const int32_t nq = w.tiles[it.tile].rows * G;
    if (nq < 2 || static_cast<size_t>(w.n_items_) >= w.items.size()) continue;
    AttentionWork::Item second = it;
    it.q_end = nq / 2;
    second.q_begin = nq / 2;
    it.cost = second.cost = (it.cost + 1) / 2;
    w.items[w.n_items_++] = second;
  }
  // Largest first, so dynamic claiming ends with the small items.
  std::sort(w.items.begin(), w.items.begin() + w.n_items_,
            [](const AttentionWork::Item& a, const AttentionWork::Item& b) {
              if (a.cost != b.cost) return a.cost > b.cost;
              if (a.tile != b.tile) return a.tile < b.tile;
              if (a.kv_head != b.kv_head) return a.kv_head < b.kv_head;
              if (a.chunk_begin != b.chunk_begin) return a.chunk_begin < b.chunk_begin;
              return a.q_begin < b.q_begin;
            });
  w.planned_T = in.T;
  w.planned_nth = nth;
  w.next_item.store(0, std::memory_order_relaxed);
}

void attention_run(const AttentionParams& p, const AttentionInputs& in, AttentionWork& w,
                   void* scratch, const ExecContext& ctx) {
  KILN_CHECK(w.planned_T == in.T && w.planned_nth == ctx.nth,
             "attention_run: planned for T={} nth={}, called with T={} nth={}", w.planned_T,
             w.planned_nth, in.T, ctx.nth);
  KILN_CHECK(scratch != nullptr, "attention_run: null scratch");
  const ScratchLayout lay = layout(p, w.limits_);
  char* base = static_cast<char*>(scratch);
  detail::AttnArgs args{&p, &in, &w, reinterpret_cast<float*>(base + lay.run_ml),
                        reinterpret_cast<float*>(base + lay.partials)};
  float* ws = reinterpret_cast<float*>(base + lay.ws) +
              static_cast<int64_t>(ctx.tid) * detail::attn_ws_floats(p);
  const auto& f = fns(p);

  const int64_t row_floats = static_cast<int64_t>(p.n_heads) * p.head_dim;
  Range zr = split_range(w.n_inert_, ctx.tid, ctx.nth);
  for (int64_t i = zr.begin; i < zr.end; ++i)
    std::fill_n(in.out + w.inert[i] * row_floats, row_floats, 0.0f);

  // Each thread claims its next item before running the current one, so that the current
  // one's last block can ask for the next one's first keys.
  int64_t i = w.next_item.fetch_add(1, std::memory_order_relaxed);
  while (i < w.n_items_) {
    const int64_t after = w.next_item.fetch_add(1, std::memory_order_relaxed);
    f.run_item(args, w.items[i], after < w.n_items_ ? &w.items[after] : nullptr, ws);
    i = after;
  }
  ctx.sync();
  // Every thread has stopped claiming: re-arm the counter for the next run of this plan.
  if (ctx.tid == 0) w.next_item.store(0, std::memory_order_relaxed);
  Range mr = split_range(w.n_merges_, ctx.tid, ctx.nth);
  for (int64_t i = mr.begin; i < mr.end; ++i) f.merge_tile(args, w.merges[i]);
}

}  // namespace kiln::kernels
