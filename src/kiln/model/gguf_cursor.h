// A bounds-checked little-endian reader over the bytes of a GGUF file. Every read checks that the
// bytes exist first; a short file gives one Error saying what was being read, where, and how
// many bytes were missing. Internal to the GGUF reader.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "kiln/base/error.h"

namespace kiln::model {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader copies little-endian numbers as they are");

class GgufCursor {
 public:
  GgufCursor(const uint8_t* data, size_t size, std::string_view file)
      : data_(data), size_(size), file_(file) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }

  // Names the part of the file being read ("metadata key #3 'general.name'") in every error.
  void set_context(std::string context) { context_ = std::move(context); }

  // Throws "<file>: <context>: <message>".
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    std::string message = fmt::format(format, std::forward<Args>(args)...);
    if (context_.empty()) kiln::fail("{}: {}", file_, message);
    kiln::fail("{}: {}: {}", file_, context_, message);
  }

  // Throws unless n more bytes exist.
  void need(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      fail("file is truncated: {} needs {} bytes at offset {}, but the file ends at {}", what, n,
           pos_, size_);
    }
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  void read_bytes(void* dst, size_t n, std::string_view what) {
    need(n, what);
    if (n > 0) std::memcpy(dst, data_ + pos_, n);
    pos_ += n;
  }

  // A GGUF string: u64 byte length, then the bytes (no terminator, not checked to be UTF-8).
  std::string read_string(std::string_view what) {
    uint64_t length = read<uint64_t>(what);
    if (length > remaining()) {
      fail("{} is {} bytes long at offset {}, past the end of the file ({} bytes)", what, length,
           pos_, size_);
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string_view file_;
  std::string context_;
};

}  // namespace kiln::model
