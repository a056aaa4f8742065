// Internal to json_matcher.cc: the byte-level grammar its Feeder walks (the frame kinds and
// their phases, JSON's number grammar) and how a frame's spare fields encode a number's or a
// string's progress. One unit with json_matcher.cc, split out for the file's length.
#pragma once
#include <cstdint>

#include "kiln/engine/json/json_matcher.h"

namespace kiln::engine::json_grammar {

enum Kind : uint8_t { kValue, kObject, kArray, kString, kNumber, kKeyword, kLiteral };

// Object phases. kKey / kMember: a child frame (the key, the value) is on top.
enum ObjectPhase : uint8_t { kObjOpen, kObjNeedKey, kObjKey, kObjColon, kObjMember, kObjAfter };
// Array phases; kArrItem: the item's frame is on top.
enum ArrayPhase : uint8_t { kArrOpen, kArrNeedItem, kArrItem, kArrAfter };
// String phases.
enum StringPhase : uint8_t {
  kStrNormal,
  kStrEscape,
  kStrHex,
  kStrNeedBackslash,
  kStrNeedU,
  kStrUtf8
};
// Number phases; the ones a number may end in are marked below.
enum NumberPhase : uint8_t {
  kNumStart,
  kNumMinus,
  kNumZero,
  kNumInt,
  kNumDot,
  kNumFrac,
  kNumE,
  kNumESign,
  kNumExp
};

// next_number_phase's answers beside a phase: the byte is not part of the number (which may
// end before it), or cannot follow at all.
constexpr uint8_t kNumEnded = 254, kNumBad = 255;

// The phase after `b`, given the phase before it (JSON's number grammar).
inline uint8_t next_number_phase(uint8_t phase, uint8_t b, bool integer) {
  const bool digit = b >= '0' && b <= '9';
  switch (phase) {
    case kNumStart:
      if (b == '-') return kNumMinus;
      [[fallthrough]];
    case kNumMinus:
      if (b == '0') return kNumZero;
      return digit ? static_cast<uint8_t>(kNumInt) : kNumBad;
    case kNumInt:
      if (digit) return kNumInt;
      [[fallthrough]];
    case kNumZero:
      if (!integer && b == '.') return kNumDot;
      if (!integer && (b == 'e' || b == 'E')) return kNumE;
      return kNumEnded;
    case kNumDot:
      return digit ? static_cast<uint8_t>(kNumFrac) : kNumBad;
    case kNumFrac:
      if (digit) return kNumFrac;
      if (b == 'e' || b == 'E') return kNumE;
      return kNumEnded;
    case kNumE:
      if (b == '+' || b == '-') return kNumESign;
      return digit ? static_cast<uint8_t>(kNumExp) : kNumBad;
    case kNumESign:
      return digit ? static_cast<uint8_t>(kNumExp) : kNumBad;
    case kNumExp:
      return digit ? static_cast<uint8_t>(kNumExp) : kNumEnded;
    default:
      return kNumBad;
  }
}

constexpr uint8_t kAnyKey = 255;  // object key that is not a schema property
constexpr uint8_t kIntegerOnly = 1;
// A number frame whose schema has bounds: `used` holds its digits as one integer, `pos` the
// integer digits (low byte) and fraction digits (next byte), `aux` 1 after a minus sign.
constexpr uint8_t kBounded = 2;

inline NumberSoFar number_so_far(const JsonFrame& f, uint8_t phase) {
  NumberSoFar n;
  n.negative = f.aux != 0;
  n.mantissa = f.used;
  n.int_digits = static_cast<int>(f.pos & 0xFF);
  n.frac_digits = static_cast<int>(f.pos >> 8);
  switch (phase) {
    case kNumZero:
      n.at = NumberPrefix::kZero;
      break;
    case kNumInt:
      n.at = NumberPrefix::kInt;
      break;
    case kNumDot:
      n.at = NumberPrefix::kDot;
      break;
    case kNumFrac:
      n.at = NumberPrefix::kFrac;
      break;
    default:
      n.at = NumberPrefix::kSign;
  }
  return n;
}
constexpr uint8_t kLowSurrogate = 1;  // the \u being read must be DC00..DFFF
// A string frame's `used`: this bit when its schema limits the length, and below it the
// characters read so far.
constexpr uint64_t kLengthLimited = uint64_t{1} << 63;
// A string frame whose schema has an automaton (pattern / format): `used` holds this bit, the
// automaton state in its low 32 bits and, inside a multi-byte character, the bits read so far
// from bit 32 on (`aux` counts the bytes still to come, `pos` their next byte's range).
constexpr uint64_t kPatterned = uint64_t{1} << 62;
constexpr int kPartialShift = 32;
constexpr uint64_t kPartialUnit = uint64_t{1} << kPartialShift;  // bit 0 of the partial bits

inline const char* const kKeywords[] = {"true", "false", "null"};

inline bool is_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
inline bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
inline int hex_value(uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}
inline bool number_may_end(uint8_t phase) {
  return phase == kNumZero || phase == kNumInt || phase == kNumFrac || phase == kNumExp;
}
inline uint32_t byte_range(uint8_t lo, uint8_t hi) { return (uint32_t{lo} << 8) | hi; }

}  // namespace kiln::engine::json_grammar
