// An incremental pushdown automaton over bytes that accepts exactly the JSON texts a compiled
// JsonSchema allows (json_schema.h): objects, arrays, strings (escapes, \u surrogate pairs,
// well-formed UTF-8, no raw control characters), numbers, true/false/null.
//
// Invariant the constrained decoder relies on: every byte sequence the matcher accepts can be
// completed to a valid value, so masking tokens by "all bytes accepted" never leads into a
// dead end. Hence checks happen at the earliest byte (a lone low surrogate is refused at its
// second hex digit, a used object key at the first byte that tells it apart).
//
// Nesting: at most kMaxJsonDepth levels.
// Whitespace: allowed between structural tokens in the shapes serializers write: one space or
// tab, or one line break followed by an indentation of at most kIndentPerLevel blanks per level
// open (compact, ", "/": " separators, and pretty printers up to 4-space indents all fit). A
// sampling model could otherwise spend its tokens on whitespace (blank lines, runs of spaces);
// none before the top-level value or after it, so once the value is complete the only continuation
// is end of sequence (a top-level number may still take more digits).
//
// State is a stack of small frames; copying a JsonMatchState is cheap, which is what the
// vocabulary walk (json_token_mask.h) does at every trie node.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kiln/engine/json/json_schema.h"

namespace kiln::engine {

struct JsonFrame {
  uint8_t kind = 0;
  uint8_t phase = 0;
  uint8_t aux = 0;
  uint8_t flags = 0;
  uint32_t node = 0;  // schema node; for literal frames the trie index
  uint32_t pos = 0;   // trie node, keyword offset, item count, \u value or UTF-8 byte range
  uint64_t used = 0;  // object: keys already present; key literal: keys excluded
};

struct JsonMatchState {
  std::vector<JsonFrame> stack;
  uint32_t ws_run = 0;  // the current run of structural whitespace (0: none; json_matcher.cc)
  // Whitespace may precede the top-level value (a constraint that starts after a marker, e.g.
  // the newline after <tool_call>); one run of the same shape.
  bool leading_space = false;
};

constexpr uint32_t kIndentPerLevel = 4;
// Objects and arrays nest at most this deep (frames, a key or string counting as one): the
// walk copies the stack, so an unbounded one would let a model make every step slower.
constexpr size_t kMaxJsonDepth = 64;

// Feeds one byte. False: the byte cannot continue any allowed value; `state` is then
// unspecified (callers try bytes on a copy).
bool json_feed(const JsonSchema& schema, JsonMatchState& state, uint8_t byte);
// The bytes fed so far form a complete allowed value.
bool json_complete(const JsonSchema& schema, const JsonMatchState& state);
JsonMatchState json_start(const JsonSchema& schema);
// True when feeding `byte` is accepted and leaves `state` exactly as it is (a plain character
// inside a string, or inside a patterned string one its automaton loops on; a digit inside a
// number's digits): lets the vocabulary walk skip the copy. False says nothing (json_feed
// decides).
bool json_byte_keeps_state(const JsonSchema& schema, const JsonMatchState& state, uint8_t byte);
// Inside a string, past any escape or partial character (where plain content may follow).
// A patterned string counts when its automaton loops on every character from here.
bool json_in_plain_string(const JsonSchema& schema, const JsonMatchState& state);
// Inside a string: how many more characters its schema's maxLength allows (UINT32_MAX when it
// has none), and the state after `chars` more plain characters (false when that is too many).
// Plain content of a length-limited string changes its state only by this count.
uint32_t json_string_room(const JsonSchema& schema, const JsonMatchState& state);
bool json_add_string_chars(const JsonSchema& schema, JsonMatchState& state, uint32_t chars);

// The per-request object: a schema and where generation stands in it.
class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const JsonSchema> schema, bool leading_space = false)
      : schema_(std::move(schema)), state_(json_start(*schema_)) {
    state_.leading_space = leading_space;
  }

  // Feeds bytes; on false the matcher is unusable (the constrained decoder never feeds a
  // token it did not allow).
  bool feed(std::string_view bytes) {
    for (char c : bytes) {
      if (!json_feed(*schema_, state_, static_cast<uint8_t>(c))) return false;
    }
    return true;
  }
  bool complete() const { return json_complete(*schema_, state_); }
  const JsonSchema& schema() const { return *schema_; }
  const std::shared_ptr<const JsonSchema>& schema_ptr() const { return schema_; }
  const JsonMatchState& state() const { return state_; }

 private:
  std::shared_ptr<const JsonSchema> schema_;
  JsonMatchState state_;
};

}  // namespace kiln::engine
