// Internal: the attention work item and merge, written once over a vector type S (AVX-512,
// AVX2, or the scalar one in attention.cc). Include after the S header.
//
// Invariance argument, which every loop below keeps: the arithmetic applied to a (row, head)
// depends only on that row's key range. Scores are per (query, key) FMA chains over head_dim
// in order, reduced by S::hsum; max/exp/sum over a chunk run over the row's own range with
// lanes counted from its start; acc += p_j * v_j runs over j ascending, lane = dimension;
// partials fold in chunk order through one function. Tiling, blocking and the thread split
// only change which queries ride along, never those operations.
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

  // Address of key `pos` of KV head kvh in the f16 pool.
  static const uint16_t* key_at(const uint16_t* pool, const Geometry& g, int kvh, int pos) {
    int64_t slot = static_cast<int64_t>(g.bt[pos / g.ps]) * g.ps + pos % g.ps;
    return pool + slot * g.kv_stride + static_cast<int64_t>(kvh) * g.hd;
  }

  // Converts keys [pos0, pos0 + n) of one KV head from the f16 pool into dst [n][hd], and
  // prefetches keys [pf0, pf1) (the next block: pages are scattered, so the hardware cannot
  // guess them, and the conversion would otherwise wait on every line from memory).
  static void load_block(const uint16_t* pool, const Geometry& g, int kvh, int pos0, int n,
                         float* dst, int pf0, int pf1) {
    const int line_elems = 64 / static_cast<int>(sizeof(uint16_t));
    for (int pos = pf0; pos < pf1; ++pos) {
      const auto* src = reinterpret_cast<const char*>(key_at(pool, g, kvh, pos));
      for (int x = 0; x < g.hd; x += line_elems) detail::prefetch_t0(src + 2 * x);
    }
    // Walk pages and offsets instead of dividing per key.
    int page = pos0 / g.ps, off = pos0 % g.ps;
    for (int j = 0; j < n; ++j) {
      int64_t slot = static_cast<int64_t>(g.bt[page]) * g.ps + off;
      const uint16_t* src = pool + slot * g.kv_stride + static_cast<int64_t>(kvh) * g.hd;
      float* d = dst + static_cast<int64_t>(j) * g.hd;
      for (int x = 0; x < g.hd; x += W) S::store(d + x, S::load_f16(src + x));
      if (++off == g.ps) {
        off = 0;
        ++page;
      }
    }
  }

  // scores[q][j0 + k] = scale * dot(q_q, key_k) for NQ queries and NK keys (f32 rows).
  template <int NQ, int NK>
  static void qk_block(const float* const* qv, const float* keys, int hd, float scale,
                       float* const* srow, int j0) {
    F acc[NQ][NK];
    for (int q = 0; q < NQ; ++q)
      for (int k = 0; k < NK; ++k) acc[q][k] = S::zero();
    for (int d = 0; d < hd; d += W) {
      F kv[NK];
      for (int k = 0; k < NK; ++k) kv[k] = S::load(keys + k * hd + d);
      for (int q = 0; q < NQ; ++q) {
        F qq = S::load(qv[q] + d);
        for (int k = 0; k < NK; ++k) acc[q][k] = S::fma(qq, kv[k], acc[q][k]);
      }
    }
    for (int q = 0; q < NQ; ++q)
      for (int k = 0; k < NK; ++k) srow[q][j0 + k] = S::hsum(acc[q][k]) * scale;
  }

  template <int NQ>
  static void qk_keys(const float* const* qv, const float* keys, int nk, int hd, float scale,
                      float* const* srow, int j0) {
    int k = 0;
    for (; k + 4 <= nk; k += 4) qk_block<NQ, 4>(qv, keys + k * hd, hd, scale, srow, j0 + k);
    for (; k < nk; ++k) qk_block<NQ, 1>(qv, keys + k * hd, hd, scale, srow, j0 + k);
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

  [[gnu::noinline]] static void finalize(float* O, float L, int hd) {
    F inv = S::set1(1.0f / L);
    for (int d = 0; d < hd; d += W) S::store(O + d, S::mul(S::load(O + d), inv));
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

  // acc[x] += sum over j in [j_lo, j_hi) of p[j] * vals[j - jb][x], j ascending.
  static void pv_accumulate(float* acc, const float* p, const float* vals, int jb, int j_lo,
                            int j_hi, int hd) {
    constexpr int R = 8;  // vectors of acc held in registers at once
    for (int d = 0; d < hd; d += R * W) {
      int nv = imin(R, (hd - d) / W);
      F r[R];
      for (int x = 0; x < nv; ++x) r[x] = S::load(acc + d + x * W);
      for (int j = j_lo; j < j_hi; ++j) {
        F pj = S::set1(p[j]);
        const float* v = vals + static_cast<int64_t>(j - jb) * hd + d;
        for (int x = 0; x < nv; ++x) r[x] = S::fma(pj, S::load(v + x * W), r[x]);
      }
      for (int x = 0; x < nv; ++x) S::store(acc + d + x * W, r[x]);
    }
  }

  static void run_item(const detail::AttnArgs& a, const AttentionWork::Item& item, float* ws) {
    const AttentionWork& w = *a.w;
    const AttentionWork::Tile& tile = w.tiles[item.tile];
    const Geometry g = geometry(a, tile);
    const int hd = g.hd, nq = g.nq, kvh = item.kv_head;
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
    for (int qi = 0; qi < nq; ++qi) {
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

    for (int c = item.chunk_begin; c < item.chunk_end; ++c) {
      const int c0 = c * CH;
      // Each row's range inside this chunk, relative to c0; the union over the tile.
      int ra[kAttnTileRows], rb[kAttnTileRows];
      int ua = CH, ub = 0;
      for (int i = 0; i < g.nr; ++i) {
        ra[i] = imax(w.row_lo[tile.row0 + i], c0) - c0;
        rb[i] = imin(w.row_hi[tile.row0 + i], c0 + CH) - c0;
        if (ra[i] < rb[i]) {
          ua = imin(ua, ra[i]);
          ub = imax(ub, rb[i]);
        }
      }
      // Scores for the union range (rows outside their own range compute values never read).
      for (int jb = ua; jb < ub; jb += KB) {
        int nk = imin(KB, ub - jb);
        load_block(a.in->kv.k, g, kvh, c0 + jb, nk, block, c0 + jb + nk,
                   c0 + imin(jb + nk + KB, ub));
        int qi = 0;
        for (; qi + 4 <= nq; qi += 4) qk_keys<4>(qv + qi, block, nk, hd, a.p->scale, srow + qi, jb);
        for (; qi < nq; ++qi) qk_keys<1>(qv + qi, block, nk, hd, a.p->scale, srow + qi, jb);
      }
      // Per-query softmax pieces, and where each query's acc goes.
      float* acc[kAttnTileRows * 64];
      for (int qi = 0; qi < nq; ++qi) {
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
        softmax_part(srow[qi], ra[i], rb[i], &pm[qi], &pl[qi]);
        for (int d = 0; d < hd; d += W) S::store(dst + d, S::zero());
      }
      // acc += p V, one block of V converted once for every query of the tile.
      for (int jb = ua; jb < ub; jb += KB) {
        int je = imin(jb + KB, ub);
        load_block(a.in->kv.v, g, kvh, c0 + jb, je - jb, block, c0 + je, c0 + imin(je + KB, ub));
        for (int qi = 0; qi < nq; ++qi) {
          int i = qi / g.G;
          int lo = imax(ra[i], jb), hi = imin(rb[i], je);
          if (lo < hi) pv_accumulate(acc[qi], srow[qi], block, jb, lo, hi, hd);
        }
      }
      for (int qi = 0; qi < nq; ++qi) {
        if (prefix) {
          if (pm[qi] != -std::numeric_limits<float>::infinity())  // empty: nothing to fold
            fold(&Mp[qi][0], &Mp[qi][1], O[qi], pm[qi], pl[qi], acc[qi], hd);
        } else {
          acc[qi][hd] = pm[qi];
          acc[qi][hd + 1] = pl[qi];
        }
      }
    }
    if (prefix && tile.split_chunk == tile.chunk_end)
      for (int qi = 0; qi < nq; ++qi) finalize(O[qi], Mp[qi][1], hd);
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
        finalize(O, M[1], g.hd);
      }
    }
  }

  static constexpr detail::AttentionFns table() { return {run_item, merge_tile}; }
};

}  // namespace kiln::kernels
