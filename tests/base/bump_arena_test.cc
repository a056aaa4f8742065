#include "kiln/base/bump_arena.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace kiln {
namespace {

TEST(BumpArena, PiecesAreAlignedDisjointAndInAllocationOrder) {
  BumpArena arena(4096);
  std::vector<std::shared_ptr<uint8_t>> pieces;
  for (size_t bytes : {1, 63, 64, 65, 1000, 7}) pieces.push_back(arena.allocate(bytes));
  for (size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pieces[i].get()) % 64, 0u) << i;
    if (i > 0) {  // braces: EXPECT_* expands to an if/else
      EXPECT_GT(pieces[i].get(), pieces[i - 1].get()) << i;  // one chunk, in order
    }
  }
  // Sizes rounded up to 64: 64 + 64 + 64 + 128 + 1024 + 64 bytes laid end to end.
  EXPECT_EQ(pieces[5].get() - pieces[0].get(), 64 + 64 + 64 + 128 + 1024);
  EXPECT_EQ(arena.reserved_bytes(), 4096u);
}

TEST(BumpArena, OpensNewChunksAndGivesLargePiecesTheirOwn) {
  BumpArena arena(1024);
  auto a = arena.allocate(1000);
  auto b = arena.allocate(100);  // does not fit behind a: a new chunk
  EXPECT_EQ(arena.reserved_bytes(), 2048u);
  auto big = arena.allocate(5000);  // larger than a chunk
  EXPECT_EQ(arena.reserved_bytes(), 2048u + 5056u);
  auto c = arena.allocate(64);  // still goes behind b
  EXPECT_EQ(c.get() - b.get(), 128);
  std::memset(big.get(), 1, 5000);
  std::memset(a.get(), 2, 1000);
  EXPECT_EQ(big.get()[4999], 1);
}

TEST(BumpArena, PiecesOutliveTheArena) {
  std::shared_ptr<uint8_t> piece;
  {
    BumpArena arena(256);
    piece = arena.allocate(100);
  }
  std::memset(piece.get(), 7, 100);  // ASan would flag a freed chunk
  EXPECT_EQ(piece.get()[99], 7);
}

TEST(BumpArena, ConcurrentAllocationsNeverOverlap) {
  BumpArena arena(1 << 16);
  std::vector<std::shared_ptr<uint8_t>> got[2];
  auto work = [&](int t) {
    for (int i = 0; i < 500; ++i) {
      got[t].push_back(arena.allocate(64));
      std::memset(got[t].back().get(), t + 1, 64);
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  for (int t = 0; t < 2; ++t) {
    for (const auto& p : got[t]) {
      for (int i = 0; i < 64; ++i) ASSERT_EQ(p.get()[i], t + 1);
    }
  }
}

}  // namespace
}  // namespace kiln
