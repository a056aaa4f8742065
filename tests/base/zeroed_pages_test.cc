#include "kiln/base/zeroed_pages.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <utility>

namespace kiln {
namespace {

// Resident set size of this process, from /proc/self/statm (pages).
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total = 0, resident = 0;
  statm >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

TEST(ZeroedPages, ZeroAlignedAndResidentOnlyWhereWritten) {
  constexpr size_t kBytes = size_t{512} << 20;
  const size_t before = resident_bytes();
  ZeroedPages pages(kBytes);
  ASSERT_NE(pages.data(), nullptr);
  EXPECT_EQ(pages.bytes(), kBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pages.data()) % (size_t{2} << 20), 0u);
  // Untouched, the mapping costs (almost) nothing: a memset'd buffer would add 512 MiB.
  EXPECT_LT(resident_bytes(), before + (size_t{64} << 20));
  auto* bytes = static_cast<unsigned char*>(pages.data());
  for (size_t at : {size_t{0}, kBytes / 3, kBytes - 1}) EXPECT_EQ(bytes[at], 0) << at;
  bytes[kBytes - 1] = 7;  // the last byte is writable
  EXPECT_EQ(bytes[kBytes - 1], 7);
}

TEST(ZeroedPages, MovesOwnership) {
  ZeroedPages a(size_t{4} << 20);
  void* p = a.data();
  ZeroedPages b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  ZeroedPages c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.bytes(), size_t{4} << 20);
  static_cast<unsigned char*>(c.data())[0] = 1;
}

TEST(ZeroedPages, EmptyIsNull) {
  ZeroedPages none(0);
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.bytes(), 0u);
}

}  // namespace
}  // namespace kiln
