// Where one request's output stands under its constraint: a JSON schema (sampling.json_schema)
// or a grammar (sampling.grammar: GBNF, SGLang's ebnf or regex). The matcher state of the open
// value, the ids that may end it, and, for a constraint that opens
// only after a marker (sampling.json_after), the output's last bytes while it watches for the
// marker. The scheduler's emitter masks a row with the cursor's state, then feeds it the token
// the row produced; verify rows sample from the states along the proposals (states_along).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/engine/grammar/grammar.h"
#include "kiln/engine/json/constraint_matcher.h"
#include "kiln/engine/token_text.h"

namespace kiln::engine {

class ConstraintCursor {
 public:
  ConstraintCursor() = default;  // no constraint: every token is fed, nothing is masked
  // `schema` null: no constraint. `markers` empty: the value starts with the first token
  // (whitespace before it only with `leading_space`); otherwise it starts after the output's
  // first marker (with leading whitespace allowed), and once complete the cursor watches for
  // the next marker. `skip_special`: whether a control token's text counts towards a marker.
  ConstraintCursor(std::shared_ptr<const JsonSchema> schema, std::vector<std::string> markers,
                   bool leading_space, bool skip_special, std::vector<int32_t> end_ids);
  // A grammar over the whole output (no markers).
  ConstraintCursor(std::shared_ptr<const Grammar> grammar, std::vector<int32_t> end_ids);

  // A value is open: the next token must continue it (or end it, once it is complete).
  bool open() const { return matcher_.has_value(); }
  const ConstraintMatcher& matcher() const { return *matcher_; }
  // The ids that may end the value once it is complete (end-of-generation and stop ids).
  std::span<const int32_t> end_ids() const { return end_ids_; }

  // Advances past `token`: an end id ends the value; other tokens' bytes continue it (after a
  // marker, a complete value closes the cursor until the next marker). While no value is open
  // and markers are set, the token's text is watched for a marker. False when the open value
  // refuses the token (the matcher is then unusable: the emitter only feeds what the mask
  // allowed, so this means a bug).
  bool feed(int32_t token, const TokenText& tokenizer);

  // The states rows sample from when the cursor is open: the current one, then the state after
  // each of `proposals` in turn while the value accepts them and stays incomplete (verify row
  // j samples after the first j proposals). Empty when the cursor is not open.
  std::vector<ConstraintMatcher> states_along(std::span<const int32_t> proposals,
                                              const TokenText& tokenizer) const;

 private:
  // Looks for a marker in the output's last bytes and opens the value after it.
  void watch_markers(int32_t token, const TokenText& tokenizer);

  std::shared_ptr<const JsonSchema> schema_;
  std::vector<std::string> markers_;
  bool skip_special_ = true;
  std::optional<ConstraintMatcher> matcher_;
  std::vector<int32_t> end_ids_;
  std::string tail_;  // with markers: the output's last bytes while no value is open
};

}  // namespace kiln::engine
