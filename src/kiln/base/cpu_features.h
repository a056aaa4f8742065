// What the CPU we run on supports, detected once. Kernels dispatch on it at run time so one
// binary runs on any x86-64; KILN_ISA=scalar|avx2|avx512 caps it (for tests and comparisons;
// avx512 also switches off the matrix engine, base/amx.h, which KILN_ISA=amx or none leaves on).
#pragma once
#include <string>

namespace kiln {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx_vnni = false;
};

const CpuFeatures& cpu_features();
// Best ISA tier usable for kernels: Avx512 needs F/BW/VL/DQ/VNNI/BF16, Avx2 needs AVX2+FMA+F16C.
Isa best_isa();
// The tier kernels use: best_isa() capped by KILN_ISA and by set_isa_cap().
Isa active_isa();
void set_isa_cap(Isa cap);
const char* isa_name(Isa isa);
// "avx512f avx512bw ..." for logs and the compile-cache key.
std::string cpu_feature_string();

}  // namespace kiln
