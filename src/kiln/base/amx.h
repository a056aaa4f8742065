// The matrix engine (AMX: tile registers, TDPBSUD int8 and TDPBF16PS bf16 tile products):
// whether this process may use it, decided once. Three things must all allow it: CPUID's
// AMX-TILE and AMX-INT8 bits, XCR0's tile state bits 17-18 (the OS saves the tiles), and
// Linux's per-process grant of tile data (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
// which must succeed before any thread runs a tile instruction, else the first one faults.
// amx_status() asks for the grant the first time it runs; every kernel checks amx_active()
// (which calls it) before it touches a tile, so the grant always comes first.
#pragma once
#include <string>

namespace kiln {

// What the probe reads, separated so that tests can simulate a host (a refused grant, a
// hypervisor that hides the tile state).
struct AmxProbe {
  bool cpuid_tile = false;  // CPUID.(7,0):EDX[24]
  bool cpuid_int8 = false;  // CPUID.(7,0):EDX[25]
  bool cpuid_bf16 = false;  // CPUID.(7,0):EDX[22]
  bool xcr0_tiles = false;  // XCR0[17] and XCR0[18]
  // Asks the kernel for tile data; returns 0 or an errno value. Called only when the CPU and the
  // OS state allow AMX.
  int (*request_tile_data)() = nullptr;
};

struct AmxStatus {
  bool usable = false;
  bool bf16 = false;  // AMX-BF16 too
  std::string why;    // why not, for the start-up log line; empty when usable
};

// The decision for the probe's readings (pure but for the request it makes).
AmxStatus evaluate_amx(const AmxProbe& probe);
// This host's readings: CPUID, XGETBV and the arch_prctl system call.
AmxProbe host_amx_probe();
// This process's status: evaluate_amx(host_amx_probe()), once.
const AmxStatus& amx_status();

// Whether the matmul kernels use AMX now: usable, not capped by KILN_ISA (avx512, avx2 or
// scalar switch it off; amx or unset leave it on) or set_amx_enabled(false), and the vector
// tier is AVX-512 (the AMX kernels' float steps are AVX-512 code).
bool amx_active();
// Switches AMX off (or back on, where usable) for this process: tests and A/B benchmarks.
void set_amx_enabled(bool on);
// Forgets set_amx_enabled: KILN_ISA decides again.
void reset_amx_enabled();
// "on" when active, else "off (<why>)": the start-up log's word for it.
std::string amx_summary();
// The matmul kernels' tier for logs and benchmark records: "avx512+amx" where AMX is active,
// "avx512+amx-bf16" under the bf16 contract, else the vector tier's name.
std::string matmul_tier_name();

// THE BF16 CONTRACT (opt-in: KILN_MATMUL_CONTRACT=bf16, or set_bf16_contract): quantized
// weights are decompressed to bf16 (each weight the value the int8 contract's dequantization
// gives, rounded to nearest even) and multiplied with the activations rounded to bf16 by
// AMX-BF16 tile products accumulated in f32 inside the tiles, at every row count, batch 1
// included, so batch invariance and graph == eager hold as under the int8 contract. Its bits are
// the matrix engine's own (TDPBF16PS sums in an order no scalar loop reproduces): they differ
// from the int8 contract's, and from host to host only where the hardware's do.
// Whether AMX-BF16 can run here: AMX usable with the BF16 products (the host's CPUID).
bool bf16_contract_usable();
// Whether quantized matmuls run the bf16 contract now: asked for (KILN_MATMUL_CONTRACT=bf16 or
// set_bf16_contract(true)), usable, and AMX active (KILN_ISA=avx512 or lower keeps int8).
bool bf16_contract_active();
// Throws kiln::Error when KILN_MATMUL_CONTRACT is set to anything but int8 or bf16 (a typo
// would otherwise leave the int8 contract on without a word); the runtime checks at start-up.
void check_matmul_contract_env();
// Asks for (or against) the bf16 contract in this process: the command line and tests.
void set_bf16_contract(bool on);
// Forgets set_bf16_contract: KILN_MATMUL_CONTRACT decides again.
void reset_bf16_contract();
// "int8", "bf16", or "int8 (bf16 asked for, but <why>)": the start-up log's word for it.
std::string matmul_contract_summary();

}  // namespace kiln
