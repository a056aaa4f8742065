#include "kiln/engine/json/constraint_cursor.h"

#include <algorithm>
#include <utility>

namespace kiln::engine {

ConstraintCursor::ConstraintCursor(std::shared_ptr<const JsonSchema> schema,
                                   std::vector<std::string> markers, bool leading_space,
                                   bool skip_special, std::vector<int32_t> end_ids)
    : schema_(std::move(schema)),
      markers_(std::move(markers)),
      skip_special_(skip_special),
      end_ids_(std::move(end_ids)) {
  if (schema_ && markers_.empty()) matcher_.emplace(JsonMatcher(schema_, leading_space));
}

ConstraintCursor::ConstraintCursor(std::shared_ptr<const Grammar> grammar,
                                   std::vector<int32_t> end_ids)
    : end_ids_(std::move(end_ids)) {
  if (grammar) matcher_.emplace(GrammarMatcher(std::move(grammar)));
}

bool ConstraintCursor::feed(int32_t token, const TokenText& tokenizer) {
  const bool after_marker = !markers_.empty();
  if (!matcher_) {
    // A constraint that waits for its marker: this token may complete the marker.
    if (schema_ && after_marker) watch_markers(token, tokenizer);
    return true;
  }
  if (std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end()) return true;
  const std::optional<std::string> bytes = tokenizer.token_bytes(token);
  if (!bytes || !matcher_->feed(*bytes)) return false;
  // After a marker, the constraint lifts once its value is complete (the next marker opens it
  // again).
  if (after_marker && matcher_->complete()) matcher_.reset();
  return true;
}

// Opens the value when the output reaches one of the markers. Bytes of the same token after the
// marker start the value; where they cannot, this value goes unconstrained (the token is
// already chosen) and the marker is looked for again.
void ConstraintCursor::watch_markers(int32_t token, const TokenText& tokenizer) {
  // The markers as the output shows them: with skip_special_tokens false a control token's text
  // counts ("[TOOL_CALLS]" is one in Mistral's vocabularies).
  const size_t before = tail_.size();
  tokenizer.append_token_text(token, skip_special_, tail_);
  if (tail_.size() == before) return;
  // The marker that ends last (markers may overlap: the latest one opens the value).
  size_t value_at = std::string::npos, longest = 0;
  for (const std::string& marker : markers_) {
    longest = std::max(longest, marker.size());
    const size_t at = tail_.rfind(marker);
    if (at != std::string::npos &&
        (value_at == std::string::npos || at + marker.size() > value_at)) {
      value_at = at + marker.size();
    }
  }
  if (value_at == std::string::npos) {
    if (tail_.size() >= longest) tail_.erase(0, tail_.size() - (longest - 1));
    return;
  }
  const std::string rest = tail_.substr(value_at);
  tail_.clear();
  matcher_.emplace(JsonMatcher(schema_, /*leading_space=*/true));
  if (!matcher_->feed(rest) || matcher_->complete()) matcher_.reset();
}

std::vector<ConstraintMatcher> ConstraintCursor::states_along(std::span<const int32_t> proposals,
                                                              const TokenText& tokenizer) const {
  std::vector<ConstraintMatcher> states;
  if (!matcher_) return states;
  states.push_back(*matcher_);
  // A proposal the value refuses ends the path: it is not accepted, so no row samples after it.
  ConstraintMatcher along = *matcher_;
  for (int32_t proposal : proposals) {
    const std::optional<std::string> bytes = tokenizer.token_bytes(proposal);
    if (!bytes || !along.feed(*bytes)) break;
    // A JSON value stops here once complete (after a marker the constraint lifts; otherwise
    // only an end id follows). A grammar's sentence may go on ([0-9]+), so its rows continue.
    if (schema_ && along.complete()) break;
    states.push_back(along);
  }
  return states;
}

}  // namespace kiln::engine
