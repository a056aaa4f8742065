// A tiny GGUF writer for the reader's tests: builds a file field by field and remembers where
// each count, length, type and offset field lies, so a test can corrupt exactly that field.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/model/gguf.h"

namespace kiln::model::testing {

using Bytes = std::vector<uint8_t>;

inline void append(Bytes& out, const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
template <typename T>
void append_le(Bytes& out, T v) {
  append(out, &v, sizeof(T));
}
template <typename T>
void put_le(Bytes& bytes, size_t offset, T v) {
  std::memcpy(bytes.data() + offset, &v, sizeof(T));
}

// Encoded values (without the leading value type id).
template <typename T>
Bytes encode_scalar(T v) {
  Bytes b;
  append_le(b, v);
  return b;
}
inline Bytes encode_string(const std::string& s) {
  Bytes b;
  append_le<uint64_t>(b, s.size());
  append(b, s.data(), s.size());
  return b;
}
// An array header (element type, count) followed by already-encoded elements.
inline Bytes encode_array(GgufType element_type, uint64_t count, const Bytes& elements) {
  Bytes b;
  append_le(b, static_cast<uint32_t>(element_type));
  append_le(b, count);
  b.insert(b.end(), elements.begin(), elements.end());
  return b;
}

class GgufBuilder {
 public:
  uint32_t version = 3;
  uint32_t alignment = 32;  // where data is placed; add general.alignment yourself to declare it

  void add_kv(const std::string& key, GgufType type, Bytes value) {
    kvs_.push_back({key, static_cast<uint32_t>(type), std::move(value)});
  }
  void add_u32(const std::string& key, uint32_t v) { add_kv(key, GgufType::U32, encode_scalar(v)); }
  void add_string(const std::string& key, const std::string& v) {
    add_kv(key, GgufType::String, encode_string(v));
  }

  // dims are GGUF-ordered (fastest-varying first). Without `offset`, the tensor goes after the
  // previous one at the next aligned position. nbytes is how many data bytes to reserve.
  void add_tensor(const std::string& name, uint32_t ggml_type, std::vector<uint64_t> dims,
                  uint64_t nbytes, std::optional<uint64_t> offset = std::nullopt) {
    uint64_t off = offset ? *offset : next_offset_;
    tensors_.push_back({name, ggml_type, std::move(dims), nbytes, off});
    next_offset_ = std::max(next_offset_, (off + nbytes + alignment - 1) / alignment * alignment);
  }

  // Offsets of the fixed-width fields: "n_tensors", "n_kv", "version", "kv<i>.key_len",
  // "kv<i>.type", "t<i>.name_len", "t<i>.n_dims", "t<i>.dim<j>", "t<i>.type", "t<i>.offset",
  // "data" (start of the data section) and "end_of_data" (end of the last tensor's bytes; only
  // padding follows). u64 fields are listed in u64_fields, u32 in u32_fields.
  std::map<std::string, size_t> fields;
  std::vector<size_t> u64_fields, u32_fields;

  Bytes build() {
    fields.clear();
    u64_fields.clear();
    u32_fields.clear();
    Bytes out;
    append(out, "GGUF", 4);
    mark_u32(out, "version", version);
    mark_u64(out, "n_tensors", tensors_.size());
    mark_u64(out, "n_kv", kvs_.size());
    for (size_t i = 0; i < kvs_.size(); ++i) {
      std::string p = fmt::format("kv{}", i);
      mark_u64(out, p + ".key_len", kvs_[i].key.size());
      append(out, kvs_[i].key.data(), kvs_[i].key.size());
      mark_u32(out, p + ".type", kvs_[i].type);
      append(out, kvs_[i].value.data(), kvs_[i].value.size());
    }
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const TensorSpec& t = tensors_[i];
      std::string p = fmt::format("t{}", i);
      mark_u64(out, p + ".name_len", t.name.size());
      append(out, t.name.data(), t.name.size());
      mark_u32(out, p + ".n_dims", static_cast<uint32_t>(t.dims.size()));
      for (size_t j = 0; j < t.dims.size(); ++j) {
        mark_u64(out, fmt::format("{}.dim{}", p, j), t.dims[j]);
      }
      mark_u32(out, p + ".type", t.ggml_type);
      mark_u64(out, p + ".offset", t.offset);
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
    fields["data"] = out.size();
    size_t data_start = out.size();
    out.resize(data_start + next_offset_, 0);
    size_t end_of_data = data_start;
    for (const TensorSpec& t : tensors_) {
      end_of_data = std::max<size_t>(end_of_data, data_start + t.offset + t.nbytes);
    }
    fields["end_of_data"] = end_of_data;
    // A recognizable pattern, different for every tensor.
    for (size_t i = 0; i < tensors_.size(); ++i) {
      for (uint64_t k = 0; k < tensors_[i].nbytes; ++k) {
        size_t at = data_start + tensors_[i].offset + k;
        if (at < out.size()) out[at] = static_cast<uint8_t>(k * 7 + i * 31 + 1);
      }
    }
    return out;
  }

 private:
  struct KeyValue {
    std::string key;
    uint32_t type;
    Bytes value;
  };
  struct TensorSpec {
    std::string name;
    uint32_t ggml_type;
    std::vector<uint64_t> dims;
    uint64_t nbytes;
    uint64_t offset;
  };
  void mark_u32(Bytes& out, const std::string& name, uint32_t v) {
    fields[name] = out.size();
    u32_fields.push_back(out.size());
    append_le(out, v);
  }
  void mark_u64(Bytes& out, const std::string& name, uint64_t v) {
    fields[name] = out.size();
    u64_fields.push_back(out.size());
    append_le(out, v);
  }

  std::vector<KeyValue> kvs_;
  std::vector<TensorSpec> tensors_;
  uint64_t next_offset_ = 0;
};

// ggml type ids used in tests.
inline constexpr uint32_t kF32 = 0, kF16 = 1, kQ8_0 = 8, kQ4_K = 12, kIQ2_XS = 17, kI8 = 24;

// Parses bytes held in a heap buffer of exactly their size, so AddressSanitizer sees any read
// past the end (an mmap has slack up to the page boundary that would hide it).
inline std::shared_ptr<GgufFile> parse(const Bytes& bytes, const std::string& name = "test.gguf") {
  auto copy = std::make_shared<const Bytes>(bytes);
  const uint8_t* data = copy->empty() ? nullptr : copy->data();
  return GgufFile::from_bytes(data, copy->size(), copy, name);
}

// The folder the fixture generator wrote (tests/fixtures/generate_all.py), or "" when unset.
inline std::string testdata_dir() {
  const char* d = std::getenv("KILN_TESTDATA");
  return d == nullptr ? "" : std::string(d);
}

}  // namespace kiln::model::testing
