#include "kiln/base/cpu_features.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace kiln {
namespace {

bool os_saves_avx512_state() {
  unsigned eax = 0, edx = 0;
  __asm__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (eax & 0xE6) == 0xE6;  // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
}

bool os_saves_avx_state() {
  unsigned eax = 0, edx = 0;
  __asm__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (eax & 0x6) == 0x6;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  bool osxsave = (c & bit_OSXSAVE) != 0;
  bool avx_os = osxsave && os_saves_avx_state();
  f.fma = avx_os && (c & bit_FMA);
  f.f16c = avx_os && (c & bit_F16C);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = avx_os && (b & bit_AVX2);
  bool z_os = osxsave && os_saves_avx512_state();
  f.avx512f = z_os && (b & bit_AVX512F);
  f.avx512bw = z_os && (b & bit_AVX512BW);
  f.avx512vl = z_os && (b & bit_AVX512VL);
  f.avx512dq = z_os && (b & bit_AVX512DQ);
  f.avx512vnni = z_os && (c & bit_AVX512VNNI);
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx512bf16 = z_os && (a & bit_AVX512BF16);
    f.avx_vnni = avx_os && (a & bit_AVXVNNI);
  }
  return f;
}

Isa parse_env_cap() {
  const char* env = std::getenv("KILN_ISA");
  if (env == nullptr) return Isa::Avx512;
  if (std::strcmp(env, "scalar") == 0) return Isa::Scalar;
  if (std::strcmp(env, "avx2") == 0) return Isa::Avx2;
  return Isa::Avx512;
}

std::atomic<int> g_cap{-1};

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

Isa best_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx512bf16 &&
      f.fma && f.f16c)
    return Isa::Avx512;
  if (f.avx2 && f.fma && f.f16c) return Isa::Avx2;
  return Isa::Scalar;
}

void set_isa_cap(Isa cap) { g_cap.store(static_cast<int>(cap)); }

Isa active_isa() {
  int cap = g_cap.load(std::memory_order_relaxed);
  if (cap < 0) {
    cap = static_cast<int>(parse_env_cap());
    g_cap.store(cap);
  }
  int best = static_cast<int>(best_isa());
  return static_cast<Isa>(cap < best ? cap : best);
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "?";
}

std::string cpu_feature_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += s.empty() ? name : std::string(" ") + name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  add(f.avx_vnni, "avxvnni");
  return s;
}

}  // namespace kiln
