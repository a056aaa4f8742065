#include "kiln/model/tokenizer_utf8.h"

#include <cstdint>

namespace kiln::model {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Expected total length for a lead byte, 0 for a byte that can never start a sequence.
size_t lead_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Valid range of the byte after the lead (Unicode Table 3-7); later bytes are always 80..BF.
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

// How many bytes of `s` (at most the expected length) form a valid prefix of a sequence.
size_t valid_prefix(std::string_view s, size_t need) {
  const auto lead = static_cast<uint8_t>(s[0]);
  size_t k = 1;
  while (k < need && k < s.size()) {
    const auto b = static_cast<uint8_t>(s[k]);
    const bool ok = k == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++k;
  }
  return k;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s) {
  if (s.empty()) return 0;
  const size_t need = lead_length(static_cast<uint8_t>(s[0]));
  if (need == 0) return 0;
  return valid_prefix(s, need) == need ? need : 0;
}

size_t append_valid_utf8(std::string_view bytes, bool final, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const std::string_view rest = bytes.substr(i);
    const size_t need = lead_length(static_cast<uint8_t>(rest[0]));
    if (need == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    const size_t k = valid_prefix(rest, need);
    if (k == need) {
      out.append(rest.data(), k);
    } else if (k == rest.size() && !final) {
      return i;  // may still be completed by the next bytes
    } else {
      out += kReplacement;
    }
    i += k;
  }
  return i;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace kiln::model
