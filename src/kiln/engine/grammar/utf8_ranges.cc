#include "kiln/engine/grammar/utf8_ranges.h"

namespace kiln::engine {

namespace {

int encode(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

// Splits lo..hi until each piece has one encoded length and its continuation bytes span whole
// 64-value blocks except at the lead, so that lo's and hi's bytes, pairwise, give the ranges.
void split(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
  for (const uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      split(lo, edge, out);
      split(edge + 1, hi, out);
      return;
    }
  }
  for (int k = 1; k < 4; ++k) {
    const uint32_t m = (1u << (6 * k)) - 1;  // the bits of the last k bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  encode(hi, b);
  ByteRangeSeq seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<ByteRangeSeq> utf8_sequences(const CodePointSet& set) {
  std::vector<ByteRangeSeq> out;
  for (const CodePointRange& r : set) split(r.lo, r.hi, out);
  return out;
}

}  // namespace kiln::engine
