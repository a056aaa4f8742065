// Internal: the attention work item and merge, written once over a vector type S (AVX-512,
// AVX2, or the scalar one in attention.cc). Include after the S header, which must add
// reduce_lanes (see AttnAvx512 in attention_avx512.cc) to the plain vector type.
//
// Invariance argument, which every loop below keeps: the arithmetic applied to a (row, head)
// depends only on that row's key range. Scores are per (query, key) FMA chains over head_dim
// in order, summed across lanes by S::reduce_lanes' fixed tree (the same for every input
// position, so a score does not depend on which other keys or queries share the reduction);
// the optional softcap is lane-wise on each score; max/exp/sum over a chunk run over the row's own
// range with lanes counted from its start; acc += p_j * v_j runs over j ascending, lane =
// dimension; partials fold in chunk order through one function. Tiling, register blocking, whether
// K/V are read from the f16 pool or from a converted f32 copy (the same values), and the thread
// split only change which queries ride along, never those operations. A q8 cache is always read
// through dequant_rows (f32 copies of one 16-key block), so the same holds for it.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kiln/kernels/attention_isa.h"

namespace kiln::kernels::detail {
// A hint only (never faults): the same in every instance, including the scalar one.
inline void prefetch_t0(const char* p) { __builtin_prefetch(p, 0, 3); }
}  // namespace kiln::kernels::detail

namespace kiln::kernels {

template <class S>
struct AttentionSimd {
  using F = typename S::F;
  static constexpr int W = S::W;
  static constexpr int CH = kAttnChunk;
  static constexpr int KB = detail::kAttnKeyBlock;

  static int imin(int a, int b) { return a < b ? a : b; }
  static int imax(int a, int b) { return a > b ? a : b; }

  struct Geometry {
    int hd, G, H, KH, ps, nr, nq;
    int64_t row_stride;  // q / out floats per row
    int64_t kv_stride;   // cache elements per slot
    const int32_t* bt;   // block table row of the tile's sequence
  };

  static Geometry geometry(const detail::AttnArgs& a, const AttentionWork::Tile& tile) {
    const AttentionParams& p = *a.p;
    Geometry g;
    g.hd = p.head_dim;
    g.G = p.n_heads / p.n_kv_heads;
    g.H = p.n_heads;
    g.KH = p.n_kv_heads;
    g.ps = a.in->kv.page_size;
    g.nr = tile.rows;
    g.nq = tile.rows * g.G;
    g.row_stride = static_cast<int64_t>(p.n_heads) * p.head_dim;
    g.kv_stride = static_cast<int64_t>(p.n_kv_heads) * p.head_dim;
    g.bt = a.in->block_table + static_cast<int64_t>(tile.seq) * p.max_pages_per_seq;
    return g;
  }

  // Address of key `pos` of KV head kvh in the pool (f16 or q8 plane).
  template <class T>
  static const T* key_at(const T* pool, const Geometry& g, int kvh, int pos) {
    int64_t slot = static_cast<int64_t>(g.bt[pos / g.ps]) * g.ps + pos % g.ps;
    return pool + slot * g.kv_stride + static_cast<int64_t>(kvh) * g.hd;
  }

  // Pointers to keys [pos0, pos0 + n) of KV head kvh in a pool plane (walks pages and offsets
  // instead of dividing per key).
  template <class T>
  static void key_ptrs(const T* pool, const Geometry& g, int kvh, int pos0, int n, const T** out) {
    int page = pos0 / g.ps, off = pos0 % g.ps;
    for (int j = 0; j < n; ++j) {
      int64_t slot = static_cast<int64_t>(g.bt[page]) * g.ps + off;
      out[j] = pool + slot * g.kv_stride + static_cast<int64_t>(kvh) * g.hd;
      if (++off == g.ps) {
        off = 0;
        ++page;
      }
    }
  }

  // The pool rows of the block after the current one (K or V, f16 or q8), asked for from memory
  // a few lines at a time by the loops over the current block: pages are scattered, so the
  // hardware cannot guess the next block, and asking for a whole block at once (128 lines)
  // fills the core's miss queue and stalls the arithmetic it should overlap. Spread this way,
  // a cold block (KV last read a step ago) costs about what a cached one does (measured:
  // bench/kernels_bench BM_AttentionDecodeCold).
  struct NextRows {
    const char* row[KB];
    int n = 0;
    int bytes = 0;  // per row

    // Rows [r0, r1), whole.
    void fetch_rows(int r0, int r1) const {
      for (int r = r0; r < imin(r1, n); ++r)
        for (int b = 0; b < bytes; b += 64) detail::prefetch_t0(row[r] + b);
    }
    // The lines starting in fraction [x0, x1) / hd of every row (a pass over elements
    // [x0, x1) of the current block asks for the same share of the next).
    void fetch_share(int x0, int x1, int hd) const {
      const int b0 = (x0 * bytes / hd + 63) / 64 * 64, b1 = x1 * bytes / hd;
      for (int b = b0; b < b1; b += 64)
        for (int r = 0; r < n; ++r) detail::prefetch_t0(row[r] + b);
    }
  };

  template <class T>
  static void next_rows(const T* pool, const Geometry& g, int kvh, int pos0, int pos1,
                        NextRows* next) {
    next->n = imax(0, imin(KB, pos1 - pos0));  // callers ask for one block at most
    next->bytes = g.hd * static_cast<int>(sizeof(T));
    const T* rows[KB];
    key_ptrs(pool, g, kvh, pos0, next->n, rows);
    for (int j = 0; j < next->n; ++j) next->row[j] = reinterpret_cast<const char*>(rows[j]);
  }

  // Keys [pos0, pos0 + n) of KV head kvh dequantized from a q8 plane (value * its block's
  // scale, one rounding) into f32 rows dst[n][hd]. Every q8 block goes through here, whatever
  // the number of queries, so a key's f32 value never depends on the batch.
  static void dequant_rows(const int8_t* plane, const float* scales, const Geometry& g, int kvh,
                           int pos0, int n, float* dst, const float** rows, const NextRows& next) {
    int page = pos0 / g.ps, off = pos0 % g.ps;
    for (int j = 0; j < n; ++j) {
      const int64_t slot = static_cast<int64_t>(g.bt[page]) * g.ps + off;
      const int8_t* src = plane + slot * g.kv_stride + static_cast<int64_t>(kvh) * g.hd;
      const F sc = S::set1(scales[slot * g.KH + kvh]);
      next.fetch_rows(j, j + 1);
      float* d = dst + static_cast<int64_t>(j) * g.hd;
      for (int x = 0; x < g.hd; x += W) S::store(d + x, S::mul(S::load_i8(src + x), sc));
      rows[j] = d;
      if (++off == g.ps) {
        off = 0;
        ++page;
      }
    }
  }

  // Converts n f16 rows to f32 rows dst[n][hd] (when many queries share a block, converting
  // once beats converting inside every query group's FMA loop).
  static void convert_rows(const uint16_t* const* src, int n, int hd, float* dst,
                           const float** rows, const NextRows& next) {
    for (int j = 0; j < n; ++j) {
      next.fetch_rows(j, j + 1);
      float* d = dst + static_cast<int64_t>(j) * hd;
      for (int x = 0; x < hd; x += W) S::store(d + x, S::load_f16(src[j] + x));
      rows[j] = d;
    }
  }

  static F ld(const float* p) { return S::load(p); }
  static F ld(const uint16_t* p) { return S::load_f16(p); }

  // Accumulators one register-blocked kernel holds: AVX-512 has 32 vector registers, AVX2 16.
  static constexpr int kAcc = W >= 16 ? 16 : 8;
  // Queries one QK or PV pass handles at most. From the f16 pool (items of at most kMaxQ
  // queries) a pass takes them all, so each K/V vector is converted exactly once; from a
  // converted f32 block, passes of 4 balance loads and FMAs better.
  static constexpr int kMaxQ = 8;
  template <class T>
  static constexpr int max_q() {
    return sizeof(T) == sizeof(float) ? 4 : kMaxQ;
  }

  // srow[q][j0 + k] = scale * dot(q_q, key_k) for NQ queries and NK keys. Each pair is one
  // FMA chain over head_dim in order (lane = d mod W), then S::reduce_lanes' fixed tree, which
  // sums every input vector's lanes in the same order whatever its position: a score does not
  // depend on NQ, NK or which other pairs share the reduction. Keys are f32 or f16 rows.
  template <int NQ, int NK, class T>
  [[gnu::always_inline]] static void qk_block(const float* const* qv, const T* const* kp, int hd,
                                              F scale, float* const* srow, int j0,
                                              const NextRows* next, int k0) {
    constexpr int N = NQ * NK;
    if (next) next->fetch_rows(k0, k0 + NK);
    F acc[N];
    for (int i = 0; i < N; ++i) acc[i] = S::zero();
    for (int d = 0; d < hd; d += W) {
      F kv[NK];
      for (int k = 0; k < NK; ++k) kv[k] = ld(kp[k] + d);
      for (int q = 0; q < NQ; ++q) {
        F qq = S::load(qv[q] + d);
        for (int k = 0; k < NK; ++k) acc[q * NK + k] = S::fma(qq, kv[k], acc[q * NK + k]);
      }
    }
    for (int g0 = 0; g0 < N; g0 += W) {
      F v[W];
      for (int i = 0; i < W; ++i) v[i] = g0 + i < N ? acc[g0 + i] : S::zero();
      alignas(64) float t[W];
      S::store(t, S::mul(S::reduce_lanes(v), scale));
      for (int i = 0; i < W && g0 + i < N; ++i) srow[(g0 + i) / NK][j0 + (g0 + i) % NK] = t[i];
    }
  }

  // Not inlined (nor are pv_group's passes): compiled alone, the register-blocked loops keep
  // every accumulator in a register instead of competing with run_item's state.
  // next (may be null): the block after this one, asked for a key group at a time.
  template <int NQ, class T>
  [[gnu::noinline]] static void qk_keys(const float* const* qv, const T* const* kp, int nk, int hd,
                                        F scale, float* const* srow, int j0, const NextRows* next) {
    constexpr int NK = kAcc / NQ > 0 ? kAcc / NQ : 1;
    int k = 0;
    for (; k + NK <= nk; k += NK) qk_block<NQ, NK>(qv, kp + k, hd, scale, srow, j0 + k, next, k);
    for (; k < nk; ++k) qk_block<NQ, 1>(qv, kp + k, hd, scale, srow, j0 + k, next, k);
    if (next) next->fetch_rows(nk, KB);  // a next block longer than this one
  }

  // qk_keys and pv_group by number of queries (1..kMaxQ).
  template <class T>
  static constexpr void (*kQk[kMaxQ])(const float* const*, const T* const*, int, int, F,
                                      float* const*, int, const NextRows*) = {
      qk_keys<1, T>, qk_keys<2, T>, qk_keys<3, T>, qk_keys<4, T>,
      qk_keys<5, T>, qk_keys<6, T>, qk_keys<7, T>, qk_keys<8, T>};

  // Scores of queries [q0, q1) against nk keys at block offset j0, max_q<T>() per pass.
  // next (may be null) is asked for by the first pass.
  template <class T>
  static void qk_queries(const float* const* qv, const T* const* kp, int nk, int hd, float scale,
                         float* const* srow, int j0, int q0, int q1, const NextRows* next) {
    const F sc = S::set1(scale);
    for (int qi = q0; qi < q1; qi += max_q<T>()) {
      const float* const* q = qv + qi;
      float* const* s = srow + qi;
      const auto* qk = kQk<T>;  // named: cppcheck cannot parse a variable template's subscript
      qk[imin(max_q<T>(), q1 - qi) - 1](q, kp, nk, hd, sc, s, j0, qi == q0 ? next : nullptr);
    }
  }

  // Fold a chunk partial (m, l, acc) into a running state (M, L, O). An empty state (M = -inf)
  // takes the partial as is. Not inlined: the chunk phase and the merge phase must run the
  // same instructions.
  [[gnu::noinline]] static void fold(float* M, float* L, float* O, float m, float l,
                                     const float* acc, int hd) {
    if (*M == -std::numeric_limits<float>::infinity()) {
      *M = m;
      *L = l;
      std::memcpy(O, acc, static_cast<size_t>(hd) * sizeof(float));
      return;
    }
    float mn = *M > m ? *M : m;
    float fa = std::exp(*M - mn);
    float fb = std::exp(m - mn);
    *M = mn;
    *L = *L * fa + l * fb;
    F va = S::set1(fa), vb = S::set1(fb);
    for (int d = 0; d < hd; d += W)
      S::store(O + d, S::fma(S::load(acc + d), vb, S::mul(S::load(O + d), va)));
  }

  // The sink logit joins the running state as one more key with no value: L grows by
  // exp(sink - M) (all of it rescaled when the sink is the larger). Folded once, just before
  // finalize, after every chunk, so it does not depend on how the keys were split.
  [[gnu::noinline]] static void fold_sink(float* M, float* L, float* O, float sink, int hd) {
    if (*M == -std::numeric_limits<float>::infinity()) {  // no key at all: only the sink
      *M = sink;
      *L = 1.0f;
      for (int d = 0; d < hd; d += W) S::store(O + d, S::zero());
      return;
    }
    const float mn = *M > sink ? *M : sink;
    const float fa = std::exp(*M - mn);
    *L = *L * fa + std::exp(sink - mn);
    *M = mn;
    if (fa == 1.0f) return;
    const F va = S::set1(fa);
    for (int d = 0; d < hd; d += W) S::store(O + d, S::mul(S::load(O + d), va));
  }

  [[gnu::noinline]] static void finalize(float* O, float L, int hd) {
    F inv = S::set1(1.0f / L);
    for (int d = 0; d < hd; d += W) S::store(O + d, S::mul(S::load(O + d), inv));
  }

  // s = cap * tanh(s / cap) in place over s[a, b), before the max. Lane-wise, with lanes counted
  // from a like softmax_part's, so a score's cap depends only on the score.
  static void softcap_part(float* s, int a, int b, float cap) {
    const F c = S::set1(cap), inv = S::set1(1.0f / cap);
    for (int j = a; j < b; j += W) {
      int n = imin(W, b - j);
      S::store_n(s + j, S::mul(c, S::tanh(S::mul(S::load_n(s + j, n), inv))), n);
    }
  }

  // Max, then p = exp(s - max) in place, over s[a, b); returns max and sum.
  static void softmax_part(float* s, int a, int b, float* m_out, float* l_out) {
    F mv = S::set1(-std::numeric_limits<float>::infinity());
    int j = a;
    for (; j + W <= b; j += W) mv = S::max(S::load(s + j), mv);
    float m = S::hmax(mv);
    for (; j < b; ++j) m = s[j] > m ? s[j] : m;
    F mm = S::set1(m);
    F acc = S::zero();
    for (j = a; j < b; j += W) {
      int c = imin(W, b - j);
      S::store_n(s + j, S::exp(S::sub(S::load_n(s + j, c), mm)), c);
      acc = S::add(acc, S::load_n(s + j, c));  // only the row's own lanes
    }
    *m_out = m;
    *l_out = S::hsum(acc);
  }

  // acc_q[d, d + R*W) += sum over j in [lo, hi) of p_q[j] * val_j[...] for NQ queries that
  // share the key range, j ascending; val_j = vp[j - jb] (f32 or f16 rows). Per (query, lane)
  // this is the same FMA chain whatever NQ and R are.
  template <int NQ, int R, class T>
  [[gnu::always_inline]] static void pv_pass(float* const* acc, const float* const* p,
                                             const T* const* vp, int jb, int lo, int hi, int d) {
    F r[NQ][R];
    for (int q = 0; q < NQ; ++q)
      for (int x = 0; x < R; ++x) r[q][x] = S::load(acc[q] + d + x * W);
    for (int j = lo; j < hi; ++j) {
      const T* v = vp[j - jb] + d;
      F vv[R];
      for (int x = 0; x < R; ++x) vv[x] = ld(v + x * W);
      for (int q = 0; q < NQ; ++q) {
        F pj = S::set1(p[q][j]);
        for (int x = 0; x < R; ++x) r[q][x] = S::fma(pj, vv[x], r[q][x]);
      }
    }
    for (int q = 0; q < NQ; ++q)
      for (int x = 0; x < R; ++x) S::store(acc[q] + d + x * W, r[q][x]);
  }

  // next (may be null): the block after this one; each pass over a slice of head_dim asks for
  // the same slice of it.
  template <int NQ, class T>
  [[gnu::noinline]] static void pv_group(float* const* acc, const float* const* p,
                                         const T* const* vp, int jb, int lo, int hi, int hd,
                                         const NextRows* next) {
    constexpr int R = kAcc / NQ > 0 ? kAcc / NQ : 1;
    int d = 0;
    for (; d + R * W <= hd; d += R * W) {
      if (next) next->fetch_share(d, d + R * W, hd);
      pv_pass<NQ, R>(acc, p, vp, jb, lo, hi, d);
    }
    for (; d < hd; d += W) {
      if (next) next->fetch_share(d, d + W, hd);
      pv_pass<NQ, 1>(acc, p, vp, jb, lo, hi, d);
    }
  }

  template <class T>
  static constexpr void (*kPv[kMaxQ])(float* const*, const float* const*, const T* const*, int, int,
                                      int, int, const NextRows*) = {
      pv_group<1, T>, pv_group<2, T>, pv_group<3, T>, pv_group<4, T>,
      pv_group<5, T>, pv_group<6, T>, pv_group<7, T>, pv_group<8, T>};

  // acc += p V over one block [jb, je) of keys for queries [q0, q1): consecutive queries whose
  // ranges clipped to the block are equal go through one pass (up to max_q<T>() of them).
  // next (may be null) is asked for by the first pass.
  template <class T>
  static void pv_queries(float* const* acc, const float* const* srow, const T* const* vp,
                         const int* ra, const int* rb, int G, int jb, int je, int hd, int q0,
                         int q1, const NextRows* next) {
    for (int qi = q0; qi < q1;) {
      const int lo = imax(ra[qi / G], jb), hi = imin(rb[qi / G], je);
      int qe = qi + 1;
      while (qe < q1 && qe - qi < max_q<T>() && imax(ra[qe / G], jb) == lo &&
             imin(rb[qe / G], je) == hi)
        ++qe;
      if (lo < hi) {
        const auto* pv = kPv<T>;  // named, as in qk_queries
        pv[qe - qi - 1](acc + qi, srow + qi, vp, jb, lo, hi, hd, next);
        next = nullptr;
      }
      qi = qe;
    }
    if (next) next->fetch_rows(0, KB);  // no pass ran
  }

  // Each row's range [ra, rb) of `tile` inside chunk c, relative to its start; the union
  // [ua, ub) over the tile's nr rows.
  static void tile_chunk_ranges(const AttentionWork& w, const AttentionWork::Tile& tile, int nr,
                                int c, int* ra, int* rb, int* ua, int* ub) {
    const int c0 = c * CH;
    *ua = CH;
    *ub = 0;
    for (int i = 0; i < nr; ++i) {
      ra[i] = imax(w.row_lo[tile.row0 + i], c0) - c0;
      rb[i] = imin(w.row_hi[tile.row0 + i], c0 + CH) - c0;
      if (ra[i] < rb[i]) {
        *ua = imin(*ua, ra[i]);
        *ub = imax(*ub, rb[i]);
      }
    }
  }

  // The first K block item `it` reads, as its own first QK pass would ask for it.
  static void following_first_keys(const detail::AttnArgs& a, const AttentionWork::Item& it,
                                   NextRows* next) {
    const AttentionWork::Tile& tile = a.w->tiles[it.tile];
    const Geometry g = geometry(a, tile);
    int ra[kAttnTileRows], rb[kAttnTileRows], ua = 0, ub = 0;
    tile_chunk_ranges(*a.w, tile, g.nr, it.chunk_begin, ra, rb, &ua, &ub);
    const int c0 = it.chunk_begin * CH;
    next->n = 0;
    if (ua >= ub) return;
    if (a.in->kv.dtype == KvDtype::Q8)
      next_rows(a.in->kv.k8, g, it.kv_head, c0 + ua, c0 + imin(ua + KB, ub), next);
    else
      next_rows(a.in->kv.k, g, it.kv_head, c0 + ua, c0 + imin(ua + KB, ub), next);
  }

  // Instantiated with and without the softcap, so an uncapped model runs exactly the code it
  // ran before the cap existed (one branch per item picks the instance).
  static void run_item(const detail::AttnArgs& a, const AttentionWork::Item& item,
                       const AttentionWork::Item* following, float* ws) {
    if (a.p->softcap > 0.0f)
      run_item_t<true>(a, item, following, ws);
    else
      run_item_t<false>(a, item, following, ws);
  }

  template <bool kCap>
  static void run_item_t(const detail::AttnArgs& a, const AttentionWork::Item& item,
                         const AttentionWork::Item* following, float* ws) {
    const AttentionWork& w = *a.w;
    const AttentionWork::Tile& tile = w.tiles[item.tile];
    const Geometry g = geometry(a, tile);
    const int hd = g.hd, nq = g.nq, kvh = item.kv_head;
    // This item's queries of the tile (all of them unless the planner split a GQA group).
    const int q0 = item.q_begin, q1 = item.q_end < 0 ? nq : item.q_end;
    const int64_t nq_max = detail::attn_max_queries(*a.p);
    float* scores = ws;                    // [nq_max][CH]
    float* accbuf = scores + nq_max * CH;  // [nq_max][hd]
    float* block = accbuf + nq_max * hd;   // [KB][hd]
    float* pm = block + KB * hd;           // [nq_max]
    float* pl = pm + nq_max;               // [nq_max]
    const bool prefix = item.chunk_begin == tile.chunk_begin;
    const int64_t stride = detail::attn_partial_stride(hd);
    const int64_t per_head = static_cast<int64_t>(tile.chunk_end - tile.split_chunk) * nq;

    const float* qv[kAttnTileRows * 64];
    float* srow[kAttnTileRows * 64];
    float* O[kAttnTileRows * 64];
    float* Mp[kAttnTileRows * 64];
    const uint16_t* kp16[KB];  // the current K or V block's rows in the pool
    const float* kp32[KB];     // ... or converted into `block`
    const KvLayerView& kv = a.in->kv;
    const bool q8 = kv.dtype == KvDtype::Q8;
    // q8 blocks are always dequantized to f32 once (dequant_rows); f16 ones may be read as is.
    const bool fused = !q8 && q1 - q0 <= kMaxQ;
    for (int qi = q0; qi < q1; ++qi) {
      int row = tile.row0 + qi / g.G;
      int head = kvh * g.G + qi % g.G;
      qv[qi] = a.in->q + row * g.row_stride + static_cast<int64_t>(head) * hd;
      O[qi] = a.in->out + row * g.row_stride + static_cast<int64_t>(head) * hd;
      Mp[qi] = a.run_ml + (static_cast<int64_t>(row) * g.H + head) * 2;
      srow[qi] = scores + static_cast<int64_t>(qi) * CH;
      if (prefix) {
        Mp[qi][0] = -std::numeric_limits<float>::infinity();
        Mp[qi][1] = 0.0f;
      }
    }

    // The rows of a K or V plane at [pos0, pos1) for the NextRows of the current block.
    NextRows next;
    auto set_next = [&](bool values, int pos0, int pos1) {
      if (q8)
        next_rows(values ? kv.v8 : kv.k8, g, kvh, pos0, pos1, &next);
      else
        next_rows(values ? kv.v : kv.k, g, kvh, pos0, pos1, &next);
    };
    // Each row's range [ra, rb) inside chunk c, relative to its start; the union [ua, ub) over
    // the tile.
    auto chunk_ranges = [&](int c, int* ra, int* rb, int* ua, int* ub) {
      tile_chunk_ranges(w, tile, g.nr, c, ra, rb, ua, ub);
    };

    for (int c = item.chunk_begin; c < item.chunk_end; ++c) {
      const int c0 = c * CH;
      int ra[kAttnTileRows], rb[kAttnTileRows], ua = 0, ub = 0;
      chunk_ranges(c, ra, rb, &ua, &ub);
      // Scores for the union range (rows outside their own range compute values never read).
      // Few queries: FMA straight from the f16 pool; many: convert each block once. While a
      // block computes, the next K block (after the last, the first V block) is asked for.
      for (int jb = ua; jb < ub; jb += KB) {
        const int nk = imin(KB, ub - jb);
        if (jb + KB < ub)
          set_next(false, c0 + jb + KB, c0 + imin(jb + 2 * KB, ub));
        else
          set_next(true, c0 + ua, c0 + imin(ua + KB, ub));
        if (q8) {
          dequant_rows(kv.k8, kv.k_scale, g, kvh, c0 + jb, nk, block, kp32, next);
          qk_queries(qv, kp32, nk, hd, a.p->scale, srow, jb, q0, q1, nullptr);
          continue;
        }
        key_ptrs(kv.k, g, kvh, c0 + jb, nk, kp16);
        if (fused) {
          qk_queries(qv, kp16, nk, hd, a.p->scale, srow, jb, q0, q1, &next);
        } else {
          convert_rows(kp16, nk, hd, block, kp32, next);
          qk_queries(qv, kp32, nk, hd, a.p->scale, srow, jb, q0, q1, nullptr);
        }
      }
      // Per-query softmax pieces, and where each query's acc goes.
      float* acc[kAttnTileRows * 64];
      for (int qi = q0; qi < q1; ++qi) {
        int i = qi / g.G;
        float* dst = prefix ? accbuf + static_cast<int64_t>(qi) * hd
                            : a.partials + (tile.partial_base + kvh * per_head +
                                            static_cast<int64_t>(c - tile.split_chunk) * nq + qi) *
                                               stride;
        acc[qi] = dst;
        if (ra[i] >= rb[i]) {
          pm[qi] = -std::numeric_limits<float>::infinity();
          pl[qi] = 0.0f;
          continue;
        }
        if constexpr (kCap) softcap_part(srow[qi], ra[i], rb[i], a.p->softcap);
        softmax_part(srow[qi], ra[i], rb[i], &pm[qi], &pl[qi]);
        for (int d = 0; d < hd; d += W) S::store(dst + d, S::zero());
      }
      // acc += p V, block by block; meanwhile the next V block (after the last, the next
      // chunk's first K block) is asked for.
      for (int jb = ua; jb < ub; jb += KB) {
        const int je = imin(jb + KB, ub);
        if (je < ub) {
          set_next(true, c0 + je, c0 + imin(je + KB, ub));
        } else if (c + 1 < item.chunk_end) {
          int na[kAttnTileRows], nb[kAttnTileRows], ua1 = 0, ub1 = 0;
          chunk_ranges(c + 1, na, nb, &ua1, &ub1);
          set_next(false, c0 + CH + ua1, c0 + CH + imin(ua1 + KB, ub1));
        } else if (following != nullptr) {
          // The thread's next item starts cold (its sequence's keys were last read a step
          // ago): its first K block is asked for too, as a next chunk's would be.
          following_first_keys(a, *following, &next);
        } else {
          next.n = 0;
        }
        if (q8) {
          dequant_rows(kv.v8, kv.v_scale, g, kvh, c0 + jb, je - jb, block, kp32, next);
          pv_queries(acc, srow, kp32, ra, rb, g.G, jb, je, hd, q0, q1, nullptr);
          continue;
        }
        key_ptrs(kv.v, g, kvh, c0 + jb, je - jb, kp16);
        if (fused) {
          pv_queries(acc, srow, kp16, ra, rb, g.G, jb, je, hd, q0, q1, &next);
        } else {
          convert_rows(kp16, je - jb, hd, block, kp32, next);
          pv_queries(acc, srow, kp32, ra, rb, g.G, jb, je, hd, q0, q1, nullptr);
        }
      }
      for (int qi = q0; qi < q1; ++qi) {
        if (prefix) {
          if (pm[qi] != -std::numeric_limits<float>::infinity())  // empty: nothing to fold
            fold(&Mp[qi][0], &Mp[qi][1], O[qi], pm[qi], pl[qi], acc[qi], hd);
        } else {
          acc[qi][hd] = pm[qi];
          acc[qi][hd + 1] = pl[qi];
        }
      }
    }
    if (prefix && tile.split_chunk == tile.chunk_end) {
      for (int qi = q0; qi < q1; ++qi) {
        if (a.in->sinks != nullptr)
          fold_sink(&Mp[qi][0], &Mp[qi][1], O[qi], a.in->sinks[kvh * g.G + qi % g.G], hd);
        finalize(O[qi], Mp[qi][1], hd);
      }
    }
  }

  static void merge_tile(const detail::AttnArgs& a, int32_t tile_index) {
    const AttentionWork::Tile& tile = a.w->tiles[tile_index];
    const Geometry g = geometry(a, tile);
    const int64_t stride = detail::attn_partial_stride(g.hd);
    const int64_t per_head = static_cast<int64_t>(tile.chunk_end - tile.split_chunk) * g.nq;
    for (int kvh = 0; kvh < g.KH; ++kvh) {
      for (int qi = 0; qi < g.nq; ++qi) {
        int row = tile.row0 + qi / g.G;
        int head = kvh * g.G + qi % g.G;
        float* O = a.in->out + row * g.row_stride + static_cast<int64_t>(head) * g.hd;
        float* M = a.run_ml + (static_cast<int64_t>(row) * g.H + head) * 2;
        for (int c = tile.split_chunk; c < tile.chunk_end; ++c) {
          const float* part =
              a.partials + (tile.partial_base + kvh * per_head +
                            static_cast<int64_t>(c - tile.split_chunk) * g.nq + qi) *
                               stride;
          float m = part[g.hd], l = part[g.hd + 1];
          if (m != -std::numeric_limits<float>::infinity())  // empty: nothing to fold
            fold(&M[0], &M[1], O, m, l, part, g.hd);
        }
        if (a.in->sinks != nullptr) fold_sink(&M[0], &M[1], O, a.in->sinks[head], g.hd);
        finalize(O, M[1], g.hd);
      }
    }
  }

  static constexpr detail::AttentionFns table() { return {run_item, merge_tile}; }
};

}  // namespace kiln::kernels
