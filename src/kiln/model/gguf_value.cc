#include "kiln/model/gguf_value.h"

#include <fmt/format.h>

#include <limits>
#include <type_traits>

namespace kiln::model {

std::string_view gguf_value_type_name(GgufType type) {
  static constexpr std::string_view kNames[kNumGgufTypes] = {
      "u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
      "bool", "string", "array", "u64", "i64", "f64"};
  auto id = static_cast<uint32_t>(type);
  return id < kNumGgufTypes ? kNames[id] : "unknown type";
}

bool is_gguf_integer(GgufType type) {
  switch (type) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64:
      return true;
    default:
      return false;
  }
}

bool is_gguf_float(GgufType type) { return type == GgufType::F32 || type == GgufType::F64; }

size_t GgufArray::size() const {
  return std::visit([](const auto& v) { return v.size(); }, elements);
}

namespace {

template <typename T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not one
// (overlong forms, surrogates and code points past U+10FFFF count as invalid).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t b0 = byte(i);
  size_t n;
  uint32_t cp;
  if (b0 < 0x80) return 1;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

template <typename T>
std::string scalar_text(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return fmt::format("\"{}\"", printable(v, 60));
  } else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) {
    return fmt::format("{}", static_cast<int>(v));
  } else if constexpr (std::is_same_v<T, GgufArray>) {
    return fmt::format("array<{}>[{}]", gguf_value_type_name(v.element_type()), v.size());
  } else {
    return fmt::format("{}", v);
  }
}

}  // namespace

std::optional<int64_t> GgufValue::as_i64() const {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (kIsInteger<T>) {
          if constexpr (std::is_same_v<T, uint64_t>) {
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          }
          return static_cast<int64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      storage_);
}

std::optional<uint64_t> GgufValue::as_u64() const {
  return std::visit(
      [](const auto& v) -> std::optional<uint64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (kIsInteger<T>) {
          if constexpr (std::is_signed_v<T>) {
            if (v < 0) return std::nullopt;
          }
          return static_cast<uint64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      storage_);
}

std::optional<double> GgufValue::as_f64() const {
  if (auto* f = get_if<float>()) return *f;
  if (auto* d = get_if<double>()) return *d;
  return std::nullopt;
}

std::string GgufValue::summary(size_t max_items) const {
  std::string type_name(gguf_value_type_name(type()));
  const GgufArray* arr = array();
  if (arr == nullptr) {
    return std::visit([&](const auto& v) { return type_name + " " + scalar_text(v); }, storage_);
  }
  std::string out = scalar_text(*arr) + " [";
  std::visit(
      [&](const auto& items) {
        for (size_t i = 0; i < items.size() && i < max_items; ++i) {
          using T = typename std::decay_t<decltype(items)>::value_type;
          out += i ? ", " : "";
          out += scalar_text(static_cast<T>(items[i]));
        }
        if (items.size() > max_items) out += ", ...";
      },
      arr->elements);
  return out + "]";
}

std::string printable(std::string_view s, size_t max_chars) {
  std::string out;
  size_t i = 0;
  while (i < s.size() && i < max_chars) {
    size_t n = utf8_sequence_length(s, i);
    auto b = static_cast<uint8_t>(s[i]);
    if (n == 0 || b < 0x20 || b == 0x7F) {
      out += fmt::format("\\x{:02x}", b);
      i += 1;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  if (i < s.size()) out += "...";
  return out;
}

}  // namespace kiln::model
