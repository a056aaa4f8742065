#include "kiln/engine/json/json_matcher.h"

#include <algorithm>

#include "kiln/engine/json/json_matcher_grammar.h"

namespace kiln::engine {

namespace {

using namespace json_grammar;  // NOLINT(google-build-using-namespace): the file's own grammar

// ws_run after a "\r" that still needs its "\n" (Feeder::whitespace).
constexpr uint32_t kCarriageReturn = 1u << 17;

class Feeder {
 public:
  Feeder(const JsonSchema& schema, JsonMatchState& st) : schema_(schema), st_(st) {}

  bool feed(uint8_t b) {
    if (!is_ws(b)) {
      if (st_.ws_run == kCarriageReturn) return false;  // "\r" must be followed by "\n"
      st_.ws_run = 0;
    }
    for (;;) {
      if (st_.stack.empty()) return false;  // the value is complete: nothing may follow
      JsonFrame& f = st_.stack.back();
      Result r = kReject;
      switch (f.kind) {
        case kValue:
          r = value(f, b);
          break;
        case kObject:
          r = object(f, b);
          break;
        case kArray:
          r = array(f, b);
          break;
        case kString:
          r = string(f, b);
          break;
        case kNumber:
          r = number(f, b);
          break;
        case kKeyword:
          r = keyword(f, b);
          break;
        case kLiteral:
          r = literal(f, b);
          break;
      }
      if (r != kRefeed) return r == kAccept;
    }
  }

 private:
  enum Result { kAccept, kReject, kRefeed };  // kRefeed: the top frame changed; try again

  // One run of structural whitespace has the shape a serializer writes: one space or tab (": ",
  // ", "), or a line break ("\n" or "\r\n") and an indentation of at most kIndentPerLevel
  // per level open. ws_run packs the run: its spaces and tabs, whether the break is done, and
  // a pending "\r".
  bool whitespace(uint8_t b) {
    constexpr uint32_t kBreak = 1u << 16, kCarriage = kCarriageReturn, kCount = 0xFFFF;
    uint32_t& run = st_.ws_run;
    const uint32_t blanks = run & kCount;
    if (b == '\r') {
      if (run != 0) return false;
      run = kCarriage;
      return true;
    }
    if (b == '\n') {
      if ((run & kBreak) != 0 || blanks != 0) return false;
      run = kBreak;
      return true;
    }
    if ((run & kCarriage) != 0) return false;  // "\r" must be followed by "\n"
    size_t open = 0;                           // objects and arrays open here
    for (const JsonFrame& f : st_.stack) open += f.kind == kObject || f.kind == kArray;
    const size_t limit = (run & kBreak) != 0 ? kIndentPerLevel * std::max<size_t>(open, 1) : 1;
    if (blanks + 1 > limit) return false;
    run = (run & ~kCount) | (blanks + 1);
    return true;
  }

  // The top frame has finished its value (`result`: the key index for key literals); it is
  // popped and its parent moves on.
  void child_done(int32_t result) {
    st_.stack.pop_back();
    if (st_.stack.empty()) return;
    JsonFrame& p = st_.stack.back();
    if (p.kind == kObject) {
      if (p.phase == kObjKey) {
        p.phase = kObjColon;
        p.aux = result < 0 ? kAnyKey : static_cast<uint8_t>(result);
        if (result >= 0) p.used |= uint64_t{1} << result;
      } else {
        // A tool call's tag: remember which value it took (+1; 0: not yet).
        if (result >= 0 && schema_.node(p.node).tag == p.aux)
          p.pos = static_cast<uint32_t>(result) + 1;
        p.phase = kObjAfter;
      }
    } else if (p.kind == kArray) {
      p.phase = kArrAfter;
      ++p.pos;
    }
  }

  void push(Kind kind, uint8_t phase, uint32_t node) {
    JsonFrame f;
    f.kind = kind;
    f.phase = phase;
    f.node = node;
    st_.stack.push_back(f);
  }

  Result value(JsonFrame& f, uint8_t b) {
    if (is_ws(b)) {
      return (st_.stack.size() > 1 || st_.leading_space) && whitespace(b) ? kAccept : kReject;
    }
    const SchemaNode* n = &schema_.node(f.node);
    uint32_t node = f.node;
    while (!n->any_of.empty()) {  // the branch this first byte belongs to (they are disjoint)
      bool found = false;
      for (uint32_t br : n->any_of) {
        if (schema_.node(br).first_bytes[b]) {
          node = br;
          n = &schema_.node(br);
          found = true;
          break;
        }
      }
      if (!found) return kReject;
    }
    if (!n->first_bytes[b]) return kReject;
    if (n->literals >= 0) {
      f = JsonFrame{};
      f.kind = kLiteral;
      f.node = static_cast<uint32_t>(n->literals);
      return kRefeed;
    }
    if ((b == '{' || b == '[') && st_.stack.size() > kMaxJsonDepth) return kReject;
    f.node = node;
    f.phase = 0;
    f.pos = 0;
    f.used = 0;
    switch (b) {
      case '{':
        f.kind = kObject;
        f.phase = kObjOpen;
        return kAccept;
      case '[':
        f.kind = kArray;
        f.phase = kArrOpen;
        return kAccept;
      case '"':
        f.kind = kString;
        f.phase = kStrNormal;
        if (n->automaton >= 0) {
          f.used = kPatterned | StringAutomaton::start();
        } else if (n->length_limited()) {
          f.used = kLengthLimited;
        }
        return kAccept;
      case 't':
      case 'f':
      case 'n':
        f.kind = kKeyword;
        f.aux = b == 't' ? 0 : b == 'f' ? 1 : 2;
        return kRefeed;
      default:  // '-' or a digit (first_bytes admitted it)
        f.kind = kNumber;
        f.phase = kNumStart;
        f.flags = (n->types & json_type::kNumber) ? 0 : kIntegerOnly;
        if (n->bounds.active) f.flags |= kBounded;
        f.aux = 0;
        return kRefeed;
    }
  }

  bool required_present(const JsonFrame& f) const {
    return (schema_.node(f.node).required & ~f.used) == 0;
  }
  // Keys that may not be written now: those already present, and a tool call's tagged key
  // before its tag.
  uint64_t excluded_keys(const JsonFrame& f) const {
    const SchemaNode& n = schema_.node(f.node);
    uint64_t out = f.used;
    if (n.tagged >= 0 && f.pos == 0) out |= uint64_t{1} << n.tagged;
    return out;
  }
  // A key that is not in the object yet can still be written.
  bool key_available(const JsonFrame& f) const {
    const SchemaNode& n = schema_.node(f.node);
    if (!n.has_properties) return true;
    return (schema_.trie(n.key_trie).nodes[0].subtree & ~excluded_keys(f)) != 0;
  }

  Result object(JsonFrame& f, uint8_t b) {
    switch (f.phase) {
      case kObjOpen:
      case kObjNeedKey: {
        if (is_ws(b)) return whitespace(b) ? kAccept : kReject;
        if (b == '}' && f.phase == kObjOpen) {
          if (!required_present(f)) return kReject;
          child_done(-1);
          return kAccept;
        }
        if (b != '"' || !key_available(f)) return kReject;
        f.phase = kObjKey;
        const SchemaNode& n = schema_.node(f.node);
        if (!n.has_properties) {
          push(kString, kStrNormal, 0);
          return kAccept;
        }
        const uint64_t used = excluded_keys(f);
        push(kLiteral, 0, static_cast<uint32_t>(n.key_trie));
        st_.stack.back().used = used;
        return kRefeed;
      }
      case kObjColon: {
        if (is_ws(b)) return whitespace(b) ? kAccept : kReject;
        if (b != ':') return kReject;
        f.phase = kObjMember;
        const SchemaNode& n = schema_.node(f.node);
        uint32_t member = f.aux == kAnyKey ? schema_.any_node() : n.property_nodes[f.aux];
        if (f.aux == n.tagged && f.pos > 0) member = n.tagged_nodes[f.pos - 1];
        push(kValue, 0, member);
        return kAccept;
      }
      case kObjAfter: {
        if (is_ws(b)) return whitespace(b) ? kAccept : kReject;
        if (b == ',') {
          if (!key_available(f)) return kReject;
          f.phase = kObjNeedKey;
          return kAccept;
        }
        if (b == '}' && required_present(f)) {
          child_done(-1);
          return kAccept;
        }
        return kReject;
      }
      default:
        return kReject;
    }
  }

  Result array(JsonFrame& f, uint8_t b) {
    const SchemaNode& n = schema_.node(f.node);
    const uint32_t item = n.items >= 0 ? static_cast<uint32_t>(n.items) : schema_.any_node();
    switch (f.phase) {
      case kArrOpen:
      case kArrNeedItem:
        if (is_ws(b)) return whitespace(b) ? kAccept : kReject;
        if (b == ']' && f.phase == kArrOpen) {
          if (n.min_items > 0) return kReject;
          child_done(-1);
          return kAccept;
        }
        if (f.pos >= n.max_items) return kReject;
        f.phase = kArrItem;
        push(kValue, 0, item);
        return kRefeed;
      case kArrAfter:
        if (is_ws(b)) return whitespace(b) ? kAccept : kReject;
        if (b == ',' && f.pos < n.max_items) {
          f.phase = kArrNeedItem;
          return kAccept;
        }
        if (b == ']' && f.pos >= n.min_items) {
          child_done(-1);
          return kAccept;
        }
        return kReject;
      default:
        return kReject;
    }
  }

  // A character starts in a string: false when its schema's maxLength is reached.
  bool count_character(JsonFrame& f) {
    if (!(f.used & kLengthLimited)) return true;
    if ((f.used & ~kLengthLimited) >= schema_.node(f.node).max_length) return false;
    ++f.used;
    return true;
  }

  Result string(JsonFrame& f, uint8_t b) {
    if (f.used & kPatterned) return patterned_string(f, b);
    switch (f.phase) {
      case kStrNormal:
        if (b == '"') {
          if ((f.used & kLengthLimited) &&
              (f.used & ~kLengthLimited) < schema_.node(f.node).min_length)
            return kReject;
          child_done(-1);
          return kAccept;
        }
        if (b < 0x20) return kReject;  // raw control characters must be escaped
        if (!count_character(f)) return kReject;
        if (b == '\\') {
          f.phase = kStrEscape;
          return kAccept;
        }
        if (b < 0x80) return kAccept;
        // Well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF): the
        // lead byte sets the count and the first continuation byte's range.
        f.phase = kStrUtf8;
        if (b >= 0xC2 && b <= 0xDF) {
          f.aux = 1, f.pos = byte_range(0x80, 0xBF);
        } else if (b == 0xE0) {
          f.aux = 2, f.pos = byte_range(0xA0, 0xBF);
        } else if (b == 0xED) {
          f.aux = 2, f.pos = byte_range(0x80, 0x9F);
        } else if (b >= 0xE1 && b <= 0xEF) {
          f.aux = 2, f.pos = byte_range(0x80, 0xBF);
        } else if (b == 0xF0) {
          f.aux = 3, f.pos = byte_range(0x90, 0xBF);
        } else if (b >= 0xF1 && b <= 0xF3) {
          f.aux = 3, f.pos = byte_range(0x80, 0xBF);
        } else if (b == 0xF4) {
          f.aux = 3, f.pos = byte_range(0x80, 0x8F);
        } else {
          return kReject;
        }
        return kAccept;
      case kStrUtf8:
        if (b < (f.pos >> 8) || b > (f.pos & 0xFF)) return kReject;
        f.pos = byte_range(0x80, 0xBF);
        if (--f.aux == 0) f.phase = kStrNormal;
        return kAccept;
      case kStrEscape:
        if (b == 'u') {
          f.phase = kStrHex, f.aux = 0, f.pos = 0, f.flags = 0;
          return kAccept;
        }
        for (char c : std::string_view("\"\\/bfnrt")) {
          if (b == static_cast<uint8_t>(c)) {
            f.phase = kStrNormal;
            return kAccept;
          }
        }
        return kReject;
      case kStrHex: {
        const int h = hex_value(b);
        if (h < 0) return kReject;
        if (f.flags & kLowSurrogate) {  // must be DC00..DFFF
          if ((f.aux == 0 && h != 0xD) || (f.aux == 1 && h < 0xC)) return kReject;
        } else if (f.aux == 1 && f.pos == 0xD && h >= 0xC) {
          return kReject;  // a low surrogate with no high one before it
        }
        f.pos = f.pos * 16 + static_cast<uint32_t>(h);
        if (++f.aux < 4) return kAccept;
        const bool high = !(f.flags & kLowSurrogate) && f.pos >= 0xD800 && f.pos <= 0xDBFF;
        f.phase = high ? kStrNeedBackslash : kStrNormal;
        f.flags = 0;
        return kAccept;
      }
      case kStrNeedBackslash:
        if (b != '\\') return kReject;
        f.phase = kStrNeedU;
        return kAccept;
      case kStrNeedU:
        if (b != 'u') return kReject;
        f.phase = kStrHex, f.aux = 0, f.pos = 0, f.flags = kLowSurrogate;
        return kAccept;
      default:
        return kReject;
    }
  }

  // A string whose characters follow an automaton: each decoded character must have an edge,
  // and a multi-byte character's lead and continuation bytes are accepted only while some
  // character they can still become has one. No \u escapes (see string_automaton.h).
  Result patterned_string(JsonFrame& f, uint8_t b) {
    const StringAutomaton& a = schema_.automaton(schema_.node(f.node).automaton);
    const auto state = static_cast<uint32_t>(f.used);
    auto take = [&](uint32_t cp) {
      const int64_t next = a.next(state, cp);
      if (next < 0) return kReject;
      f.used = kPatterned | static_cast<uint64_t>(next);
      f.phase = kStrNormal;
      return kAccept;
    };
    switch (f.phase) {
      case kStrNormal: {
        if (b == '"') {
          if (!a.accepting(state)) return kReject;
          child_done(-1);
          return kAccept;
        }
        if (b < 0x20) return kReject;
        if (b == '\\') {
          for (char c : std::string_view("\"\\/\b\f\n\r\t")) {
            if (a.next(state, static_cast<uint8_t>(c)) >= 0) {
              f.phase = kStrEscape;
              return kAccept;
            }
          }
          return kReject;
        }
        if (b < 0x80) return take(b);
        // The lead byte: the code points it can start (well-formed UTF-8, as string() checks).
        uint32_t lo = 0, hi = 0, range = byte_range(0x80, 0xBF), count = 0, bits = 0;
        if (b >= 0xC2 && b <= 0xDF) {
          count = 1, bits = b & 0x1Fu, lo = bits << 6, hi = lo | 0x3F;
        } else if (b >= 0xE0 && b <= 0xEF) {
          count = 2, bits = b & 0x0Fu, lo = bits << 12, hi = lo | 0xFFF;
          if (b == 0xE0) lo = 0x800, range = byte_range(0xA0, 0xBF);
          if (b == 0xED) hi = 0xD7FF, range = byte_range(0x80, 0x9F);
        } else if (b >= 0xF0 && b <= 0xF4) {
          count = 3, bits = b & 0x07u, lo = bits << 18, hi = std::min(lo | 0x3FFFFu, 0x10FFFFu);
          if (b == 0xF0) lo = 0x10000, range = byte_range(0x90, 0xBF);
          if (b == 0xF4) range = byte_range(0x80, 0x8F);
        } else {
          return kReject;
        }
        if (!a.has_edge_within(state, lo, hi)) return kReject;
        f.phase = kStrUtf8;
        f.aux = static_cast<uint8_t>(count);
        f.pos = range;
        f.used = kPatterned | (uint64_t{bits} * kPartialUnit) | state;
        return kAccept;
      }
      case kStrUtf8: {
        if (b < (f.pos >> 8) || b > (f.pos & 0xFF)) return kReject;
        const auto bits =
            static_cast<uint32_t>((f.used & ~kPatterned) >> kPartialShift) << 6 | (b & 0x3Fu);
        if (--f.aux == 0) return take(bits);
        const uint32_t lo = bits << (6 * f.aux), hi = lo | ((1u << (6 * f.aux)) - 1);
        if (!a.has_edge_within(state, lo, hi)) return kReject;
        f.pos = byte_range(0x80, 0xBF);
        f.used = kPatterned | (uint64_t{bits} * kPartialUnit) | state;
        return kAccept;
      }
      case kStrEscape: {
        const std::string_view from("\"\\/bfnrt"), to("\"\\/\b\f\n\r\t");
        const size_t i = from.find(static_cast<char>(b));
        if (i == std::string_view::npos) return kReject;  // \u among them
        return take(static_cast<uint8_t>(to[i]));
      }
      default:
        return kReject;
    }
  }

  Result number(JsonFrame& f, uint8_t b) {
    const uint8_t next = next_number_phase(f.phase, b, f.flags & kIntegerOnly);
    if (next == kNumBad) return kReject;
    if (next == kNumEnded) {
      // The byte is not part of the number: the number ends here if it may (and, bounded, is
      // within its bounds), and the byte goes to the enclosing value.
      if (!number_may_end(f.phase)) return kReject;
      if ((f.flags & kBounded) &&
          !number_in_bounds(schema_.node(f.node).bounds, number_so_far(f, f.phase))) {
        return kReject;
      }
      child_done(-1);
      return kRefeed;
    }
    if (f.flags & kBounded) {
      if (next == kNumE || next == kNumESign || next == kNumExp) return kReject;  // no exponent
      if (is_digit(b)) {
        const int frac = f.pos >> 8, whole = f.pos & 0xFF;
        if (whole + frac >= kMaxBoundedDigits) return kReject;
        f.used = f.used * 10 + (b - '0');
        f.pos = next == kNumFrac ? f.pos + 0x100 : f.pos + 1;
      } else if (b == '-') {
        f.aux = 1;
      }
      if (!number_reachable(schema_.node(f.node).bounds, number_so_far(f, next),
                            f.flags & kIntegerOnly)) {
        return kReject;
      }
    }
    f.phase = next;
    return kAccept;
  }

  Result keyword(JsonFrame& f, uint8_t b) {
    const std::string_view word = kKeywords[f.aux];
    if (b != static_cast<uint8_t>(word[f.pos])) return kReject;
    if (++f.pos == word.size()) child_done(-1);
    return kAccept;
  }

  Result literal(JsonFrame& f, uint8_t b) {
    const LiteralTrie& trie = schema_.trie(static_cast<int32_t>(f.node));
    const int64_t next = trie.child(f.pos, b);
    if (next >= 0 && (trie.nodes[static_cast<size_t>(next)].subtree & ~f.used) != 0) {
      f.pos = static_cast<uint32_t>(next);
      const LiteralTrie::Node& n = trie.nodes[f.pos];
      if (n.terminal >= 0 && n.children.empty()) child_done(n.terminal);
      return kAccept;
    }
    // Not a continuation: a literal that may end here (a number such as 1 beside 12) ends,
    // and the byte goes to the enclosing value.
    const int32_t terminal = trie.nodes[f.pos].terminal;
    if (terminal < 0) return kReject;
    child_done(terminal);
    return kRefeed;
  }

  const JsonSchema& schema_;
  JsonMatchState& st_;
};

}  // namespace

JsonMatchState json_start(const JsonSchema& schema) {
  JsonMatchState s;
  JsonFrame f;
  f.kind = kValue;
  f.node = schema.root();
  s.stack.push_back(f);
  return s;
}

bool json_in_plain_string(const JsonSchema& schema, const JsonMatchState& state) {
  if (state.stack.empty() || state.ws_run != 0) return false;
  const JsonFrame& f = state.stack.back();
  if (f.kind != kString || f.phase != kStrNormal) return false;
  if (!(f.used & kPatterned)) return true;
  return schema.automaton(schema.node(f.node).automaton)
      .loops_on_everything(static_cast<uint32_t>(f.used));
}

uint32_t json_string_room(const JsonSchema& schema, const JsonMatchState& state) {
  const JsonFrame& f = state.stack.back();
  if (!(f.used & kLengthLimited)) return UINT32_MAX;
  return schema.node(f.node).max_length - static_cast<uint32_t>(f.used & ~kLengthLimited);
}

bool json_add_string_chars(const JsonSchema& schema, JsonMatchState& state, uint32_t chars) {
  JsonFrame& f = state.stack.back();
  if (!(f.used & kLengthLimited)) return true;
  if (chars > json_string_room(schema, state)) return false;
  f.used += chars;
  return true;
}

bool json_byte_keeps_state(const JsonSchema& schema, const JsonMatchState& state, uint8_t b) {
  if (state.stack.empty()) return false;
  const JsonFrame& f = state.stack.back();
  if (f.kind == kString && f.phase == kStrNormal) {
    // ws_run is 0 inside a string (the opening quote reset it), so a plain byte changes nothing.
    const bool plain = b >= 0x20 && b < 0x80 && b != '"' && b != '\\' && state.ws_run == 0;
    if (!plain || (f.used & kLengthLimited)) return false;
    if (!(f.used & kPatterned)) return true;
    const auto at = static_cast<uint32_t>(f.used);
    return schema.automaton(schema.node(f.node).automaton).next(at, b) == at;
  }
  if (f.kind == kNumber && (f.phase == kNumInt || f.phase == kNumFrac || f.phase == kNumExp)) {
    return is_digit(b) && state.ws_run == 0 && !(f.flags & kBounded);  // bounded: digits count
  }
  return false;
}

bool json_feed(const JsonSchema& schema, JsonMatchState& state, uint8_t byte) {
  return Feeder(schema, state).feed(byte);
}

bool json_complete(const JsonSchema& schema, const JsonMatchState& state) {
  if (state.stack.empty()) return true;
  if (state.stack.size() != 1) return false;
  const JsonFrame& f = state.stack.back();
  // A top-level number or literal that may end here (it could also go on: 1 -> 12).
  if (f.kind == kNumber) {
    return number_may_end(f.phase) &&
           (!(f.flags & kBounded) ||
            number_in_bounds(schema.node(f.node).bounds, number_so_far(f, f.phase)));
  }
  if (f.kind == kLiteral) {
    return schema.trie(static_cast<int32_t>(f.node)).nodes[f.pos].terminal >= 0;
  }
  return false;
}

}  // namespace kiln::engine
