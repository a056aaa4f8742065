// GgufFile's accessors: typed metadata lookups and borrowed tensors. Parsing is in
// gguf_parser.cc, the summary in gguf_describe.cc.
#include "kiln/model/gguf.h"

#include <cmath>
#include <limits>

#include "kiln/base/error.h"
#include "kiln/base/gguf_tensor_types.h"

namespace kiln::model {

std::string GgufTensorInfo::type_name() const { return gguf_tensor_type_name(gguf_type); }

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufValue& GgufFile::require(std::string_view key, std::string_view expected) const {
  const GgufValue* v = find(key);
  if (v == nullptr)
    fail("{}: metadata key '{}' is missing (expected {})", path_, printable(key), expected);
  return *v;
}

void GgufFile::fail_type(std::string_view key, const GgufValue& v,
                         std::string_view expected) const {
  fail("{}: metadata key '{}' is {}, expected {}", path_, printable(key), v.summary(), expected);
}

const std::string& GgufFile::get_string(std::string_view key) const {
  const GgufValue& v = require(key, "a string");
  if (const std::string* s = v.string()) return *s;
  fail_type(key, v, "a string");
}

uint32_t GgufFile::get_u32(std::string_view key) const {
  constexpr std::string_view kExpected = "an integer that fits in u32";
  const GgufValue& v = require(key, kExpected);
  std::optional<uint64_t> u = v.as_u64();
  if (!u || *u > std::numeric_limits<uint32_t>::max()) fail_type(key, v, kExpected);
  return static_cast<uint32_t>(*u);
}

int64_t GgufFile::get_i64(std::string_view key) const {
  constexpr std::string_view kExpected = "an integer that fits in i64";
  const GgufValue& v = require(key, kExpected);
  std::optional<int64_t> i = v.as_i64();
  if (!i) fail_type(key, v, kExpected);
  return *i;
}

float GgufFile::get_f32(std::string_view key) const {
  constexpr std::string_view kExpected = "an f32 (or an f64 within f32 range)";
  const GgufValue& v = require(key, kExpected);
  std::optional<double> d = v.as_f64();
  // An f64 too large for f32 would silently become infinity; NaN and infinities pass through.
  if (!d || (std::isfinite(*d) && std::fabs(*d) > std::numeric_limits<float>::max())) {
    fail_type(key, v, kExpected);
  }
  return static_cast<float>(*d);
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue& v = require(key, "a bool");
  if (const bool* b = v.get_if<bool>()) return *b;
  fail_type(key, v, "a bool");
}

const std::vector<std::string>& GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& v = require(key, "an array of strings");
  if (const GgufArray* a = v.array()) {
    if (const auto* items = a->get_if<std::string>()) return *items;
  }
  fail_type(key, v, "an array of strings");
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  constexpr std::string_view kExpected = "an array of f32 (or f64)";
  const GgufValue& v = require(key, kExpected);
  if (const GgufArray* a = v.array()) {
    if (const auto* f = a->get_if<float>()) return *f;
    if (const auto* d = a->get_if<double>()) return std::vector<float>(d->begin(), d->end());
  }
  fail_type(key, v, kExpected);
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  constexpr std::string_view kExpected = "an array of integers that fit in i32";
  const GgufValue& v = require(key, kExpected);
  const GgufArray* a = v.array();
  if (a == nullptr || !is_gguf_integer(a->element_type())) fail_type(key, v, kExpected);
  std::vector<int32_t> out(a->size());
  std::visit(
      [&](const auto& items) {
        using T = typename std::decay_t<decltype(items)>::value_type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          for (size_t i = 0; i < items.size(); ++i) {
            if (!std::in_range<int32_t>(items[i])) {
              fail("{}: metadata key '{}': element {} is {}, which does not fit in i32", path_,
                   printable(key), i, items[i]);
            }
            out[i] = static_cast<int32_t>(items[i]);
          }
        }
      },
      a->elements);
  return out;
}

std::optional<std::string> GgufFile::try_get_string(std::string_view key) const {
  if (!has_key(key)) return std::nullopt;
  return get_string(key);
}
std::optional<uint32_t> GgufFile::try_get_u32(std::string_view key) const {
  if (!has_key(key)) return std::nullopt;
  return get_u32(key);
}
std::optional<int64_t> GgufFile::try_get_i64(std::string_view key) const {
  if (!has_key(key)) return std::nullopt;
  return get_i64(key);
}
std::optional<float> GgufFile::try_get_f32(std::string_view key) const {
  if (!has_key(key)) return std::nullopt;
  return get_f32(key);
}
std::optional<bool> GgufFile::try_get_bool(std::string_view key) const {
  if (!has_key(key)) return std::nullopt;
  return get_bool(key);
}
std::optional<std::vector<std::string>> GgufFile::try_get_string_array(std::string_view key) const {
  if (!has_key(key)) return std::nullopt;
  return get_string_array(key);
}
std::optional<std::vector<float>> GgufFile::try_get_f32_array(std::string_view key) const {
  if (!has_key(key)) return std::nullopt;
  return get_f32_array(key);
}
std::optional<std::vector<int32_t>> GgufFile::try_get_i32_array(std::string_view key) const {
  if (!has_key(key)) return std::nullopt;
  return get_i32_array(key);
}

bool GgufFile::has_tensor(std::string_view name) const {
  return tensor_index_.find(name) != tensor_index_.end();
}

const GgufTensorInfo& GgufFile::tensor_info(std::string_view name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) fail("{}: no tensor named '{}'", path_, printable(name));
  return tensors_[it->second];
}

Tensor GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo& info = tensor_info(name);
  if (!info.dtype && find_gguf_tensor_type(info.gguf_type) == nullptr) {
    fail("{}: tensor '{}' has type id {}, which is not a ggml type kiln knows", path_,
         printable(name), info.gguf_type);
  }
  if (!info.dtype) {
    fail("{}: tensor '{}' has type {}, which kiln does not support", path_, printable(name),
         info.type_name());
  }
  // The parser checked that these bytes lie inside the file. Tensor has no const view, and the
  // map is read-only: writing through this pointer would fault, which is the point.
  auto* bytes = const_cast<uint8_t*>(data_ + data_offset_ + info.offset);
  return Tensor::borrow(*info.dtype, info.shape, bytes, keepalive_);
}

}  // namespace kiln::model
