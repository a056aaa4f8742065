// evaluate_amx on simulated hosts: each missing piece (CPUID bits, the OS's tile state, the
// kernel's grant) turns AMX off with its own reason, and the grant is asked only when the CPU
// and the OS allow it.
#include "kiln/base/amx.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace kiln {
namespace {

int g_requests = 0;
int grant() {
  ++g_requests;
  return 0;
}
int refuse() {
  ++g_requests;
  return EPERM;
}

AmxProbe full_host(int (*request)()) {
  AmxProbe p;
  p.cpuid_tile = p.cpuid_int8 = p.cpuid_bf16 = p.xcr0_tiles = true;
  p.request_tile_data = request;
  return p;
}

TEST(Amx, UsableWhenCpuOsAndKernelAllow) {
  g_requests = 0;
  const AmxStatus s = evaluate_amx(full_host(grant));
  EXPECT_TRUE(s.usable);
  EXPECT_TRUE(s.bf16);
  EXPECT_TRUE(s.why.empty());
  EXPECT_EQ(g_requests, 1);
}

TEST(Amx, RefusedGrantFallsBackWithTheReason) {
  g_requests = 0;
  const AmxStatus s = evaluate_amx(full_host(refuse));
  EXPECT_FALSE(s.usable);
  EXPECT_NE(s.why.find("refused tile data"), std::string::npos) << s.why;
  EXPECT_NE(s.why.find("ARCH_REQ_XCOMP_PERM"), std::string::npos) << s.why;
  EXPECT_EQ(g_requests, 1);
}

TEST(Amx, NoCpuSupportOrNoOsStateNeverAsks) {
  g_requests = 0;
  AmxProbe no_int8 = full_host(grant);
  no_int8.cpuid_int8 = false;
  AmxStatus s = evaluate_amx(no_int8);
  EXPECT_FALSE(s.usable);
  EXPECT_NE(s.why.find("no AMX"), std::string::npos) << s.why;
  AmxProbe no_xcr0 = full_host(grant);
  no_xcr0.xcr0_tiles = false;
  s = evaluate_amx(no_xcr0);
  EXPECT_FALSE(s.usable);
  EXPECT_NE(s.why.find("XCR0"), std::string::npos) << s.why;
  EXPECT_EQ(g_requests, 0);
}

// This host's own answer is consistent: usable means the summary says amx unless switched off.
TEST(Amx, HostStatusAndSummaryAgree) {
  const AmxStatus& s = amx_status();
  EXPECT_EQ(s.usable, s.why.empty());
  set_amx_enabled(false);
  EXPECT_FALSE(amx_active());
  EXPECT_NE(amx_summary().find("off"), std::string::npos);
  reset_amx_enabled();
}

}  // namespace
}  // namespace kiln
