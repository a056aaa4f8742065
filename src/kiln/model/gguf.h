// Reader for GGUF model files (versions 2 and 3, little-endian): metadata, tensor infos, and
// tensors borrowed straight from a read-only memory map.
//
// Everything a file states is checked before it is used: a truncated or corrupt file, counts and
// lengths larger than the file could hold, bad shapes, misaligned, out-of-range or overlapping
// tensor data, duplicate keys or tensor names all give one kiln::Error naming the file and the
// problem. The reader never allocates more than a small multiple of the file's size.
//
// What it does not do: interpret the metadata (the model loader does), dequantize, or read
// split (multi-file) models as one. Tensors of a type kiln cannot compute with (iq2_xs, tq1_0, ...)
// are listed and bounds-checked; only asking for their data is an error.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/base/shape.h"
#include "kiln/base/tensor.h"
#include "kiln/model/gguf_value.h"

namespace kiln::model {

struct GgufTensorInfo {
  std::string name;
  uint32_t gguf_type = 0;      // ggml_type id as stored
  std::optional<DType> dtype;  // nullopt when kiln has no such dtype (iq2_xs, f64, ...)
  Shape shape;                 // row-major: GGUF's [n_embd, n_vocab] becomes {n_vocab, n_embd}
  uint64_t offset = 0;         // from the start of the data section
  uint64_t nbytes = 0;         // 0 only when the type id is unknown to ggml (size unknowable)

  std::string type_name() const;  // "q8_0", "iq2_xs", "type 99"
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

class GgufFile {
 public:
  // Maps the file and parses it. Throws Error naming the path and the problem.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // Parses bytes already in memory; `keepalive` owns them (tensors hold it), `name` is used in
  // messages in place of a path.
  static std::shared_ptr<GgufFile> from_bytes(const uint8_t* data, size_t size,
                                              std::shared_ptr<const void> keepalive,
                                              std::string name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section

  // ---- metadata ----
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }  // in file order
  const GgufValue* find(std::string_view key) const;                       // null when absent
  bool has_key(std::string_view key) const { return find(key) != nullptr; }

  // Typed accessors. They throw Error naming the key and what was expected when the key is
  // absent or its value does not have (or fit) the type asked for. Integer getters accept every
  // integer type whose value fits; float getters accept f32 and f64.
  const std::string& get_string(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::vector<std::string>& get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;    // f32 or f64 elements
  std::vector<int32_t> get_i32_array(std::string_view key) const;  // any integers that fit

  // Optional variants: nullopt when the key is absent, but a present key of the wrong type
  // still throws (a mistyped value is a broken file, not a missing setting).
  std::optional<std::string> try_get_string(std::string_view key) const;
  std::optional<uint32_t> try_get_u32(std::string_view key) const;
  std::optional<int64_t> try_get_i64(std::string_view key) const;
  std::optional<float> try_get_f32(std::string_view key) const;
  std::optional<bool> try_get_bool(std::string_view key) const;
  std::optional<std::vector<std::string>> try_get_string_array(std::string_view key) const;
  std::optional<std::vector<float>> try_get_f32_array(std::string_view key) const;
  std::optional<std::vector<int32_t>> try_get_i32_array(std::string_view key) const;

  const std::string& architecture() const { return get_string("general.architecture"); }
  // general.alignment (default 32), validated at open to be a non-zero power of two.
  uint32_t alignment() const { return alignment_; }

  // ---- tensors ----
  const std::vector<GgufTensorInfo>& tensor_infos() const { return tensors_; }  // file order
  bool has_tensor(std::string_view name) const;
  const GgufTensorInfo& tensor_info(std::string_view name) const;  // throws when absent
  // The tensor's bytes, borrowed from the file (the Tensor keeps the mapping alive). Throws when
  // the tensor is absent or its type is one kiln does not support.
  Tensor tensor(std::string_view name) const;

 private:
  friend class GgufParser;
  GgufFile() = default;
  GgufFile(const GgufFile&) = delete;  // the indexes hold views into this object's strings
  GgufFile& operator=(const GgufFile&) = delete;
  const GgufValue& require(std::string_view key, std::string_view expected) const;
  [[noreturn]] void fail_type(std::string_view key, const GgufValue& v,
                              std::string_view expected) const;

  std::string path_;
  std::shared_ptr<const void> keepalive_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string_view, size_t> key_index_;  // views into metadata_ keys
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // views into tensors_ names
};

// A few lines for people: architecture, name, version, tensor count, dtype histogram, sizes.
std::string describe(const GgufFile& file);

}  // namespace kiln::model
