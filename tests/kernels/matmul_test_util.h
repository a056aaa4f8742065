// Shared helpers of the dequant_/pack_/matmul_/embedding_ tests: random weights of every dtype,
// the f32 reference product, and running a kernel on 1..n threads.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "kiln/base/cpu_features.h"
#include "kiln/base/dtype.h"
#include "kiln/base/half.h"
#include "kiln/base/tensor.h"
#include "kiln/base/thread_pool.h"
#include "kiln/kernels/dequant.h"
#include "kiln/kernels/exec_context.h"
#include "kiln/kernels/matmul.h"
#include "kiln/kernels/packed_weight.h"
#include "kiln/kernels/quant_format.h"

namespace kiln::kernels::testing {

inline const std::vector<DType>& weight_dtypes() {
  static const std::vector<DType> kAll = [] {
    std::vector<DType> all{DType::F32, DType::F16, DType::BF16};
    for (const kernels::QuantFormat& f : kernels::kQuantFormats) all.push_back(f.dtype);
    return all;
  }();
  return kAll;
}

// Random rows of type t: random codes, finite scales of moderate size (so products stay far from
// overflow), normal values for float types.
inline std::vector<uint8_t> random_rows(DType t, int64_t n, int64_t k, std::mt19937& rng) {
  size_t row_bytes = dtype_bytes(t, k);
  std::vector<uint8_t> out(row_bytes * n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> mag(0.002f, 0.05f);
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) {
    for (int64_t i = 0; i < n * k; ++i) {
      float v = normal(rng);
      if (t == DType::F32) {
        std::memcpy(&out[4 * i], &v, 4);
      } else {
        uint16_t h = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(&out[2 * i], &h, 2);
      }
    }
    return out;
  }
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  // The scale fields (d, and dmin or m) as the format table places them: finite f16 of moderate
  // size (split-scale types' are multiplied by an integer factor per sub-block).
  const QuantFormat& f = quant_format(t);
  for (size_t b = 0; b < out.size() / f.block_bytes(); ++b) {
    if (f.record_scale == RecordScale::E8M0) {  // 2^-10 .. 2^-5 (times values up to 12)
      out[b * f.block_bytes() + f.d_offset] = static_cast<uint8_t>(118 + rng() % 6);
      continue;
    }
    for (int off : {f.d_offset, f.dmin_offset}) {
      if (off < 0) continue;
      float s = mag(rng) * ((rng() & 1) ? 1.0f : -1.0f);
      if (f.split_scales) s *= 0.1f;  // times sc
      uint16_t h = f32_to_f16(s);
      std::memcpy(&out[b * f.block_bytes() + off], &h, 2);
    }
  }
  return out;
}

inline Tensor borrow_rows(DType t, int64_t n, int64_t k, std::vector<uint8_t>& bytes) {
  return Tensor::borrow(t, Shape{n, k}, bytes.data());
}

inline std::vector<float> random_acts(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(m * k);
  for (auto& v : x) v = normal(rng);
  return x;
}

inline std::vector<float> dequantize_all(DType t, int64_t n, int64_t k,
                                         const std::vector<uint8_t>& bytes) {
  std::vector<float> w(n * k);
  size_t rb = dtype_bytes(t, k);
  for (int64_t r = 0; r < n; ++r) dequantize_row(t, bytes.data() + r * rb, &w[r * k], k);
  return w;
}

// Runs f(ctx) on nth threads with a shared barrier, as a graph plan's worker group would.
inline void run_threads(int nth, const std::function<void(const ExecContext&)>& f) {
  ThreadPool pool(nth);
  SpinBarrier barrier(nth);
  pool.run([&](int tid, int n) {
    ExecContext ctx{tid, n, n > 1 ? &barrier : nullptr};
    f(ctx);
  });
}

// The ISA tiers this machine can run, lowest first.
// matmul of x's first m rows on nth threads (NaN where nothing was written; one spare scratch
// byte, so that a kernel writing past its scratch shows under the sanitizers).
inline std::vector<float> run_matmul(const PackedWeight& w, const std::vector<float>& x, int64_t m,
                                     int nth = 1, const float* residual = nullptr) {
  std::vector<float> y(m * w.n(), std::numeric_limits<float>::quiet_NaN());
  std::vector<uint8_t> scratch(matmul_scratch_bytes(w, m) + 1);
  run_threads(nth, [&](const ExecContext& ctx) {
    matmul(w, x.data(), m, y.data(), residual, scratch.data(), ctx);
  });
  return y;
}

inline std::vector<Isa> isa_tiers() {
  std::vector<Isa> out;
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (static_cast<int>(i) <= static_cast<int>(best_isa())) out.push_back(i);
  return out;
}

// Restores the full ISA when a test that capped it ends (pass or fail).
struct IsaCapGuard {
  ~IsaCapGuard() { set_isa_cap(Isa::Avx512); }
};

}  // namespace kiln::kernels::testing
