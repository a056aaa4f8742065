#include "kiln/base/mmap_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kiln/base/resident_memory.h"

namespace kiln {
namespace {

constexpr size_t kBytes = size_t{64} << 20;

// A file of kBytes whose every byte is a function of its offset.
std::string write_pattern_file() {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kiln-mmap-test-" + std::to_string(::getpid())))
          .string();
  std::vector<uint8_t> bytes(kBytes);
  for (size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(kBytes));
  return path;
}

uint64_t checksum(const uint8_t* p, size_t n) {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i += 512) sum = sum * 31 + p[i];
  return sum;
}

TEST(MmapFile, ReleasedPagesLeaveTheResidentSetAndReadBackUnchanged) {
  const std::string path = write_pattern_file();
  auto file = MmapFile::open(path);
  std::filesystem::remove(path);  // the mapping keeps the file's pages
  const uint64_t expected = checksum(file->data(), file->size());  // faults every page in
  const int64_t before = read_resident_memory().file;
  ASSERT_GE(before, static_cast<int64_t>(kBytes));

  // A range that starts and ends mid-page: only the whole pages inside it go.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t released = MmapFile::release_pages(file->data() + 100, kBytes - 200);
  EXPECT_EQ(released, kBytes - 2 * page);
  EXPECT_LT(read_resident_memory().file, before - static_cast<int64_t>(kBytes) / 2);

  // Read again: the pages come back from the file with the same bytes.
  EXPECT_EQ(checksum(file->data(), file->size()), expected);
}

TEST(MmapFile, ReleaseIgnoresMemoryThatIsNotAMappedFile) {
  std::vector<uint8_t> heap(size_t{4} << 20, 0xAB);
  EXPECT_EQ(MmapFile::release_pages(heap.data(), heap.size()), 0u);
  for (size_t i = 0; i < heap.size(); i += 4096) ASSERT_EQ(heap[i], 0xAB) << i;

  const std::string path = write_pattern_file();
  auto file = MmapFile::open(path);
  std::filesystem::remove(path);
  // Running past the end of the mapping: not wholly inside it, so nothing is released.
  EXPECT_EQ(MmapFile::release_pages(file->data() + kBytes / 2, kBytes), 0u);
  EXPECT_EQ(MmapFile::release_pages(file->data(), 0), 0u);
}

}  // namespace
}  // namespace kiln
