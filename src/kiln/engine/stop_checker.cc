#include "kiln/engine/stop_checker.h"

#include <algorithm>

#include "kiln/base/error.h"

namespace kiln::engine {

void validate(const StopConditions& stop) {
  KILN_CHECK(stop.max_new_tokens >= 0, "max_new_tokens must be >= 0, got {}", stop.max_new_tokens);
  KILN_CHECK(stop.min_new_tokens >= 0 && stop.min_new_tokens <= stop.max_new_tokens,
             "min_new_tokens must be in [0, max_new_tokens = {}], got {}", stop.max_new_tokens,
             stop.min_new_tokens);
  for (const auto& s : stop.stop_strings) KILN_CHECK(!s.empty(), "stop strings must not be empty");
}

StopChecker::StopChecker(const StopConditions& stop, const TokenText& tokenizer, bool skip_special,
                         std::span<const int32_t> eog_ids)
    : stop_(stop), tokenizer_(&tokenizer), text_(tokenizer, skip_special) {
  validate(stop);
  if (stop_.min_new_tokens > 0) {
    if (!stop_.ignore_eos) banned_.assign(eog_ids.begin(), eog_ids.end());
    banned_.insert(banned_.end(), stop_.stop_token_ids.begin(), stop_.stop_token_ids.end());
  }
}

std::span<const int32_t> StopChecker::banned_ids() const {
  if (generated_ >= stop_.min_new_tokens) return {};
  return banned_;
}

bool StopChecker::is_stop_token(int32_t token) const {
  if (std::find(stop_.stop_token_ids.begin(), stop_.stop_token_ids.end(), token) !=
      stop_.stop_token_ids.end())
    return true;
  return !stop_.ignore_eos && tokenizer_->is_end_of_generation(token);
}

bool StopChecker::match_stop_string(StopUpdate& u) {
  size_t best_pos = std::string::npos;
  const std::string* best = nullptr;
  for (const auto& s : stop_.stop_strings) {
    const size_t pos = pending_.find(s);
    if (pos < best_pos) {  // earliest start wins; ties go to the first listed
      best_pos = pos;
      best = &s;
    }
  }
  if (best == nullptr) return false;
  u.text_delta = pending_.substr(0, best_pos);
  u.finished = true;
  u.reason = FinishReason::Stop;
  u.matched_stop = *best;
  pending_.clear();
  return true;
}

size_t StopChecker::held_back_length() const {
  // Longest suffix of pending_ that is a proper prefix of a stop string. Everything streamed
  // earlier was checked the same way, so a stop string can only begin inside pending_.
  size_t hold = 0;
  for (const auto& s : stop_.stop_strings) {
    for (size_t len = std::min(pending_.size(), s.size() - 1); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  return hold;
}

StopUpdate StopChecker::on_token(int32_t token) {
  StopUpdate u;
  // Stops are checked only once min_new_tokens tokens precede this one (SGLang semantics).
  const bool may_stop = generated_ >= stop_.min_new_tokens;
  ++generated_;
  if (may_stop && is_stop_token(token)) {
    u.text_delta = std::move(pending_) + text_.flush();
    pending_.clear();
    u.finished = true;
    u.reason = FinishReason::Stop;
    u.matched_stop_token = token;
    return u;
  }
  pending_ += text_.push(token);
  if (may_stop && match_stop_string(u)) return u;
  if (generated_ >= stop_.max_new_tokens) {
    // The last token may complete a character (and so a stop string) only once flushed.
    pending_ += text_.flush();
    if (may_stop && match_stop_string(u)) return u;
    u.text_delta = std::move(pending_);
    pending_.clear();
    u.finished = true;
    u.reason = FinishReason::Length;
    return u;
  }
  const size_t hold = held_back_length();
  u.text_delta = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return u;
}

}  // namespace kiln::engine
