// The matcher of one constrained request: a JSON schema's (json_matcher.h) or a grammar's
// (grammar/grammar_matcher.h, which SGLang's regex also runs on). A variant rather than an
// interface: the vocabulary walk that computes a mask runs each kind's own loop (no virtual
// call per byte); only feeding a sampled token and asking for completeness dispatch here.
#pragma once
#include <string_view>
#include <utility>
#include <variant>

#include "kiln/engine/grammar/grammar_matcher.h"
#include "kiln/engine/json/json_matcher.h"

namespace kiln::engine {

class ConstraintMatcher {
 public:
  // Implicit: a JsonMatcher or a GrammarMatcher is a ConstraintMatcher.
  ConstraintMatcher(JsonMatcher m) : m_(std::move(m)) {}     // NOLINT(google-explicit-constructor)
  ConstraintMatcher(GrammarMatcher m) : m_(std::move(m)) {}  // NOLINT(google-explicit-constructor)

  // Feeds bytes; false when refused (the matcher is then unusable).
  bool feed(std::string_view bytes) {
    return std::visit([&](auto& m) { return m.feed(bytes); }, m_);
  }
  // The bytes fed so far are a whole value / sentence.
  bool complete() const {
    return std::visit([](const auto& m) { return m.complete(); }, m_);
  }
  const JsonMatcher* json() const { return std::get_if<JsonMatcher>(&m_); }
  const GrammarMatcher* grammar() const { return std::get_if<GrammarMatcher>(&m_); }

 private:
  std::variant<JsonMatcher, GrammarMatcher> m_;
};

}  // namespace kiln::engine
