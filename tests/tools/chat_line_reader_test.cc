// `kiln chat`'s line input over a pipe: lines, backslash continuations, input without a final
// newline, and the end of input.
#include "chat_line_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace kiln::cli {
namespace {

struct Pipe {
  int fds[2] = {-1, -1};
  explicit Pipe(const std::string& text) {
    EXPECT_EQ(::pipe(fds), 0);
    EXPECT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fds[1]);
  }
  ~Pipe() { ::close(fds[0]); }
};

TEST(ChatLineReader, LinesContinuationsAndEnd) {
  Pipe p("hello\nfirst \\\nsecond\nlast without newline");
  ChatLineReader reader(p.fds[0]);
  std::string line;
  ASSERT_EQ(reader.read(line), ChatLineReader::Result::kLine);
  EXPECT_EQ(line, "hello");
  ASSERT_EQ(reader.read(line), ChatLineReader::Result::kLine);
  EXPECT_EQ(line, "first \nsecond");
  ASSERT_EQ(reader.read(line), ChatLineReader::Result::kLine);
  EXPECT_EQ(line, "last without newline");
  EXPECT_EQ(reader.read(line), ChatLineReader::Result::kEnd);
  EXPECT_EQ(reader.read(line), ChatLineReader::Result::kEnd);
}

TEST(ChatLineReader, EmptyLinesAreLines) {
  Pipe p("\n\nx\n");
  ChatLineReader reader(p.fds[0]);
  std::string line = "stale";
  ASSERT_EQ(reader.read(line), ChatLineReader::Result::kLine);
  EXPECT_EQ(line, "");
  ASSERT_EQ(reader.read(line), ChatLineReader::Result::kLine);
  EXPECT_EQ(line, "");
  ASSERT_EQ(reader.read(line), ChatLineReader::Result::kLine);
  EXPECT_EQ(line, "x");
  EXPECT_EQ(reader.read(line), ChatLineReader::Result::kEnd);
}

}  // namespace
}  // namespace kiln::cli
