// Shared helpers for the kernel tests: ISA-parameterized fixtures, random data, running a
// kernel on a worker group, and tolerance checks.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kiln/base/cpu_features.h"
#include "kiln/base/thread_pool.h"
#include "kiln/kernels/exec_context.h"

namespace kiln::kernels::testing {

// A fixture parameterized by ISA: caps kernels at that ISA (skips if the CPU lacks it) and
// lifts the cap afterwards.
class IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (static_cast<int>(best_isa()) < static_cast<int>(GetParam()))
      GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
    set_isa_cap(GetParam());
  }
  void TearDown() override { set_isa_cap(Isa::Avx512); }
};

inline std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) {
  return isa_name(info.param);
}

#define KILN_INSTANTIATE_ISA_TESTS(Fixture)                                           \
  INSTANTIATE_TEST_SUITE_P(                                                           \
      Isa, Fixture,                                                                   \
      ::testing::Values(::kiln::Isa::Scalar, ::kiln::Isa::Avx2, ::kiln::Isa::Avx512), \
      ::kiln::kernels::testing::isa_param_name)

// Runs f with the scalar reference ISA, then restores `isa`.
template <class F>
void with_isa(Isa isa, F&& f) {
  set_isa_cap(isa);
  f();
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -3.0f,
                                        float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Runs f(ctx) on a pool of nth threads sharing one barrier, like a plan's worker group.
inline void run_group(int nth, const std::function<void(const ExecContext&)>& f) {
  if (nth == 1) {
    f(ExecContext{});
    return;
  }
  static std::vector<std::unique_ptr<ThreadPool>> pools(9);
  if (!pools[nth]) pools[nth] = std::make_unique<ThreadPool>(nth);
  SpinBarrier barrier(nth);
  pools[nth]->run([&](int tid, int n) { f(ExecContext{tid, n, &barrier}); });
}

inline bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// |got - want| <= abs_tol + rel_tol * |want| everywhere; reports the first violation.
inline ::testing::AssertionResult all_close(const std::vector<float>& got,
                                            const std::vector<float>& want, double rel_tol,
                                            double abs_tol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size mismatch";
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    if (std::isnan(w) && std::isnan(g)) continue;
    if (!(std::fabs(g - w) <= abs_tol + rel_tol * std::fabs(w)))
      return ::testing::AssertionFailure()
             << "index " << i << ": got " << g << " want " << w << " (diff " << g - w << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::kernels::testing
