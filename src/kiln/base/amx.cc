#include "kiln/base/amx.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "kiln/base/cpu_features.h"
#include "kiln/base/error.h"

namespace kiln {
namespace {

// Linux's arch_prctl codes (asm/prctl.h) and the tile data state component (XFEATURE 18).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

int request_tile_data_from_linux() {
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return 0;
  return errno != 0 ? errno : EPERM;
}

// -1: not decided yet (KILN_ISA read on first use); 0 off; 1 on.
std::atomic<int> g_enabled{-1};

// The bf16 contract: -1 not decided yet (KILN_MATMUL_CONTRACT read on first use); 0 no; 1 yes.
std::atomic<int> g_bf16_wanted{-1};

bool bf16_wanted() {
  int on = g_bf16_wanted.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* env = std::getenv("KILN_MATMUL_CONTRACT");
    on = env != nullptr && std::strcmp(env, "bf16") == 0 ? 1 : 0;
    g_bf16_wanted.store(on, std::memory_order_relaxed);
  }
  return on == 1;
}

bool env_allows_amx() {
  const char* env = std::getenv("KILN_ISA");
  return env == nullptr || std::strcmp(env, "amx") == 0;
}

}  // namespace

AmxStatus evaluate_amx(const AmxProbe& probe) {
  AmxStatus s;
  if (!probe.cpuid_tile || !probe.cpuid_int8) {
    s.why = "the CPU has no AMX-TILE/AMX-INT8";
    return s;
  }
  if (!probe.xcr0_tiles) {
    s.why = "the OS does not enable the tile state (XCR0 bits 17-18)";
    return s;
  }
  const int err = probe.request_tile_data != nullptr ? probe.request_tile_data() : ENOSYS;
  if (err != 0) {
    s.why = std::string("the kernel refused tile data (arch_prctl ARCH_REQ_XCOMP_PERM: ") +
            std::strerror(err) + ")";
    return s;
  }
  s.usable = true;
  s.bf16 = probe.cpuid_bf16;
  return s;
}

AmxProbe host_amx_probe() {
  AmxProbe p;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    p.cpuid_bf16 = (d & (1u << 22)) != 0;
    p.cpuid_tile = (d & (1u << 24)) != 0;
    p.cpuid_int8 = (d & (1u << 25)) != 0;
  }
  unsigned osxsave_c = 0;
  if (__get_cpuid(1, &a, &b, &osxsave_c, &d) && (osxsave_c & bit_OSXSAVE) != 0) {
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    p.xcr0_tiles = (lo & (3u << 17)) == (3u << 17);
  }
  p.request_tile_data = request_tile_data_from_linux;
  return p;
}

const AmxStatus& amx_status() {
  static const AmxStatus status = evaluate_amx(host_amx_probe());
  return status;
}

bool amx_active() {
  int on = g_enabled.load(std::memory_order_relaxed);
  if (on < 0) {
    on = env_allows_amx() ? 1 : 0;
    g_enabled.store(on, std::memory_order_relaxed);
  }
  return on == 1 && active_isa() == Isa::Avx512 && amx_status().usable;
}

void set_amx_enabled(bool on) { g_enabled.store(on ? 1 : 0, std::memory_order_relaxed); }

void reset_amx_enabled() { g_enabled.store(-1, std::memory_order_relaxed); }

std::string amx_summary() {
  if (amx_active()) return "on";
  if (!amx_status().usable) return "off (" + amx_status().why + ")";
  if (active_isa() != Isa::Avx512)
    return std::string("off (the ") + isa_name(active_isa()) + " tier)";
  const char* env = std::getenv("KILN_ISA");
  return env != nullptr && !env_allows_amx() ? std::string("off (KILN_ISA=") + env + ")"
                                             : std::string("off (switched off)");
}

}  // namespace kiln

namespace kiln {

std::string matmul_tier_name() {
  if (bf16_contract_active()) return std::string(isa_name(active_isa())) + "+amx-bf16";
  return std::string(isa_name(active_isa())) + (amx_active() ? "+amx" : "");
}

bool bf16_contract_usable() { return amx_status().usable && amx_status().bf16; }

bool bf16_contract_active() { return bf16_wanted() && amx_active() && amx_status().bf16; }

void check_matmul_contract_env() {
  const char* env = std::getenv("KILN_MATMUL_CONTRACT");
  if (env == nullptr || std::strcmp(env, "int8") == 0 || std::strcmp(env, "bf16") == 0) return;
  fail("KILN_MATMUL_CONTRACT='{}' is not a matmul contract: int8 (the default) or bf16", env);
}

void set_bf16_contract(bool on) { g_bf16_wanted.store(on ? 1 : 0, std::memory_order_relaxed); }

void reset_bf16_contract() { g_bf16_wanted.store(-1, std::memory_order_relaxed); }

std::string matmul_contract_summary() {
  if (bf16_contract_active()) return "bf16";
  if (!bf16_wanted()) return "int8";
  if (!amx_active()) return "int8 (bf16 asked for, but AMX " + amx_summary() + ")";
  return "int8 (bf16 asked for, but the CPU has no AMX-BF16)";
}

}  // namespace kiln
