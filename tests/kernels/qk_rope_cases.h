// Cases shared by the tests of the fused QK-norm/RoPE/KV-write kernel (f16 and q8 caches): random
// inputs for one shape, the unfused path's q and k (per-head RMSNorm, then RoPE), and the fused
// kernel run on a thread group.
#pragma once
#include <cstdint>
#include <vector>

#include "kernel_test_util.h"
#include "kiln/kernels/norm.h"
#include "kiln/kernels/qk_norm_rope_kv_write.h"
#include "kiln/kernels/rope.h"

namespace kiln::kernels::testing {

struct QkRopeCase {
  int T, H, KH, hd;
  bool neox;
  bool norm;
};

constexpr int kQkRopePageSize = 4;
constexpr int64_t kQkRopePages = 16;

struct QkRopeInputs {
  std::vector<float> q, k, v, qw, kw, inv;
  std::vector<int32_t> pos, slots;
};

// Seeds follow the case's shape; every third row is inert (slot -1).
inline QkRopeInputs make_qk_rope_inputs(const QkRopeCase& c) {
  QkRopeInputs in;
  in.q = random_floats(c.T * c.H * c.hd, c.T + c.hd);
  in.k = random_floats(c.T * c.KH * c.hd, c.T + c.hd + 1);
  in.v = random_floats(c.T * c.KH * c.hd, c.T + c.hd + 2);
  in.qw = random_floats(c.hd, 3, 0.5f, 1.5f);
  in.kw = random_floats(c.hd, 4, 0.5f, 1.5f);
  in.inv = rope_inv_freq(c.hd, 10000.0);
  in.pos.resize(c.T);
  in.slots.resize(c.T);
  for (int t = 0; t < c.T; ++t) {
    in.pos[t] = 100 + 37 * t;
    in.slots[t] = (t % 3 == 2) ? -1 : (t * 5) % (kQkRopePages * kQkRopePageSize);
  }
  return in;
}

// The unfused path's q and k: RMSNorm per head (when c.norm), then RoPE.
inline void unfused_norm_rope(const QkRopeCase& c, const QkRopeInputs& in, std::vector<float>& qn,
                              std::vector<float>& kn) {
  qn = in.q;
  kn = in.k;
  ExecContext ctx;
  if (c.norm) {
    rms_norm(in.q.data(), in.qw.data(), qn.data(), int64_t(c.T) * c.H, c.hd, 1e-6f, ctx);
    rms_norm(in.k.data(), in.kw.data(), kn.data(), int64_t(c.T) * c.KH, c.hd, 1e-6f, ctx);
  }
  rope(qn.data(), in.pos.data(), in.inv.data(), qn.data(), c.T, c.H, c.hd, c.neox, ctx);
  rope(kn.data(), in.pos.data(), in.inv.data(), kn.data(), c.T, c.KH, c.hd, c.neox, ctx);
}

// The fused kernel on nth threads; q is rewritten in place and returned.
inline std::vector<float> run_fused_qk_norm_rope_kv_write(const QkRopeCase& c,
                                                          const QkRopeInputs& in,
                                                          const KvLayerView& view, int nth) {
  std::vector<float> qo = in.q;
  run_group(nth, [&](const ExecContext& g) {
    qk_norm_rope_kv_write(qo.data(), in.k.data(), in.v.data(), c.norm ? in.qw.data() : nullptr,
                          c.norm ? in.kw.data() : nullptr, 1e-6f, in.pos.data(), in.inv.data(),
                          c.neox, in.slots.data(), c.T, c.H, qo.data(), view, g);
  });
  return qo;
}

}  // namespace kiln::kernels::testing
