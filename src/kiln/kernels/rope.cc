// RoPE: inverse frequencies, the scalar reference, ISA dispatch and the row split.
#include "kiln/kernels/rope.h"

#include <cmath>
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/kernels/dispatch.h"
#include "kiln/kernels/rope_isa.h"

namespace kiln::kernels {
namespace detail {
namespace {

void cos_sin_ref(int32_t pos, const float* inv_freq, float* cos_out, float* sin_out, int half) {
  for (int i = 0; i < half; ++i) {
    double a = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
    cos_out[i] = static_cast<float>(std::cos(a));
    sin_out[i] = static_cast<float>(std::sin(a));
  }
}

// The rotation in double, rounded once: the reference the vector paths are tested against.
void rotate_heads_ref(const float* x, float* out, int n_heads, int hd, int n_rot, bool neox,
                      const float* cos_t, const float* sin_t) {
  int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    const float* xh = x + h * hd;
    float* oh = out + h * hd;
    for (int i = 0; i < half; ++i) {
      int i0 = neox ? i : 2 * i;
      int i1 = neox ? i + half : 2 * i + 1;
      double x0 = xh[i0], x1 = xh[i1], c = cos_t[i], s = sin_t[i];
      oh[i0] = static_cast<float>(x0 * c - x1 * s);
      oh[i1] = static_cast<float>(x1 * c + x0 * s);
    }
    copy_unrotated(xh, oh, hd, n_rot);
  }
}

}  // namespace

void copy_unrotated(const float* x, float* out, int head_dim, int n_rot) {
  if (out != x && n_rot < head_dim)
    std::memmove(out + n_rot, x + n_rot, static_cast<size_t>(head_dim - n_rot) * sizeof(float));
}

constinit const RopeFns kRopeScalar = {cos_sin_ref, rotate_heads_ref};

const RopeFns& rope_fns() { return pick_isa(kRopeScalar, kRopeAvx2, kRopeAvx512); }

}  // namespace detail

std::vector<float> rope_inv_freq(int n_rot, double freq_base) {
  KILN_CHECK(n_rot > 0 && n_rot % 2 == 0 && n_rot <= kRopeMaxHeadDim,
             "rope: n_rot must be even and in [2, {}], got {}", kRopeMaxHeadDim, n_rot);
  KILN_CHECK(freq_base > 1.0 && std::isfinite(freq_base), "rope: bad freq_base {}", freq_base);
  std::vector<float> inv(n_rot / 2);
  for (int i = 0; i < n_rot / 2; ++i)
    inv[i] = static_cast<float>(std::pow(freq_base, -2.0 * i / n_rot));
  return inv;
}

const float* rope_frequencies(const RopeSpec& spec, float* scratch) {
  const int hd = spec.head_dim, n_rot = spec.rotated();
  KILN_CHECK(hd > 0 && hd % 2 == 0 && hd <= kRopeMaxHeadDim,
             "rope: head_dim must be even and in [2, {}], got {}", kRopeMaxHeadDim, hd);
  KILN_CHECK(n_rot > 0 && n_rot % 2 == 0 && n_rot <= hd,
             "rope: n_rot must be even and in [2, head_dim {}], got {}", hd, n_rot);
  if (spec.freq_factors == nullptr) return spec.inv_freq;
  for (int i = 0; i < n_rot / 2; ++i) {
    const float f = spec.freq_factors[i];
    KILN_CHECK(f > 0.0f && std::isfinite(f), "rope: frequency factor {} is {}, must be > 0", i, f);
    scratch[i] = static_cast<float>(static_cast<double>(spec.inv_freq[i]) / f);
  }
  return scratch;
}

void rope(const float* x, const int32_t* positions, const RopeSpec& spec, float* out, int64_t rows,
          int n_heads, const ExecContext& ctx) {
  float freq_scratch[kRopeMaxHeadDim / 2];
  const float* freq = rope_frequencies(spec, freq_scratch);
  KILN_CHECK(rows >= 0 && n_heads > 0, "rope: bad shape rows={} n_heads={}", rows, n_heads);
  const auto& f = detail::rope_fns();
  const int hd = spec.head_dim, n_rot = spec.rotated();
  int64_t cols = static_cast<int64_t>(n_heads) * hd;
  Range r = detail::share(rows, ctx, 1, (2048 + cols - 1) / cols);
  float cos_t[kRopeMaxHeadDim / 2], sin_t[kRopeMaxHeadDim / 2];
  for (int64_t t = r.begin; t < r.end; ++t) {
    f.cos_sin(positions[t], freq, cos_t, sin_t, n_rot / 2);
    f.rotate_heads(x + t * cols, out + t * cols, n_heads, hd, n_rot, spec.neox, cos_t, sin_t);
  }
}

}  // namespace kiln::kernels
