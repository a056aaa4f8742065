// GGUF metadata values: every value type of the format (GGUF v2/v3), including arrays of arrays.
// Arrays store their elements in one typed vector (a vocabulary of 262144 strings is one
// std::vector<std::string>, token scores one std::vector<float>), so reading them needs no
// per-element variant and the element type of an array is kept even when it is empty.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kiln::model {

// Value type ids as stored in the file. The variants below list their alternatives in this
// order, so a variant's index() is the type id.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
inline constexpr uint32_t kNumGgufTypes = 13;

// "u8", "i32", "f32", "bool", "string", "array", ...; "type N" for an id outside the format.
std::string_view gguf_value_type_name(GgufType type);
bool is_gguf_integer(GgufType type);  // u8..i64, not bool
bool is_gguf_float(GgufType type);    // f32, f64

struct GgufArray;
using GgufArrayElements =
    std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                 std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                 std::vector<float>, std::vector<bool>, std::vector<std::string>,
                 std::vector<GgufArray>, std::vector<uint64_t>, std::vector<int64_t>,
                 std::vector<double>>;

struct GgufArray {
  GgufArrayElements elements;

  GgufType element_type() const { return static_cast<GgufType>(elements.index()); }
  size_t size() const;
  // The elements when they are of type T (e.g. get_if<float>() for an f32 array), else null.
  template <typename T>
  const std::vector<T>* get_if() const {
    return std::get_if<std::vector<T>>(&elements);
  }
};

class GgufValue {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, GgufArray, uint64_t, int64_t, double>;

  explicit GgufValue(Storage storage) : storage_(std::move(storage)) {}

  GgufType type() const { return static_cast<GgufType>(storage_.index()); }
  const Storage& storage() const { return storage_; }
  template <typename T>
  const T* get_if() const {
    return std::get_if<T>(&storage_);
  }
  const std::string* string() const { return get_if<std::string>(); }
  const GgufArray* array() const { return get_if<GgufArray>(); }

  // The value of an integer type (not bool) when it fits the result, else nullopt.
  std::optional<int64_t> as_i64() const;
  std::optional<uint64_t> as_u64() const;
  // The value of f32 or f64, else nullopt.
  std::optional<double> as_f64() const;

  // Short printable form for summaries and error messages: `u32 5`, `string "llama"`,
  // `array<string>[262144] ["<pad>", "<eos>", ...]`. Long strings and arrays are cut short and
  // control bytes escaped, so it is safe to print whatever the file held.
  std::string summary(size_t max_items = 4) const;

 private:
  Storage storage_;
};

// `s` made safe for a one-line message: control and non-ASCII bytes escaped as \xNN, and cut to
// at most max_chars bytes of input (with "..." appended).
std::string printable(std::string_view s, size_t max_chars = 80);

}  // namespace kiln::model
