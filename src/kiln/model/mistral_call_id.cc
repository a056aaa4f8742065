#include "kiln/model/mistral_call_id.h"

#include <cstdint>

namespace kiln::model {
namespace {

constexpr std::string_view kDigits =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
constexpr size_t kLength = 9;

bool alphanumeric(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

}  // namespace

std::string mistral_call_id(std::string_view id) {
  bool keep = id.size() == kLength;
  for (char c : id) keep = keep && alphanumeric(c);
  if (keep) return std::string(id);
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bits
  for (char c : id) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  std::string out;
  for (size_t i = 0; i < kLength; ++i) {
    out += kDigits[h % kDigits.size()];
    h /= kDigits.size();
  }
  return out;
}

}  // namespace kiln::model
