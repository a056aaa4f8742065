#include "kiln/engine/grammar/grammar_token_mask.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "kiln/engine/grammar/grammar_suffix_masks.h"
#include "kiln/engine/grammar/grammar_walk_memo.h"

namespace kiln::engine {

namespace {

// Sets allowed ids, counting them.
struct Allower {
  std::span<uint8_t> allowed;
  int64_t count = 0;
  void operator()(int32_t id) {
    if (id >= 0 && id < static_cast<int64_t>(allowed.size()) && !allowed[static_cast<size_t>(id)]) {
      allowed[static_cast<size_t>(id)] = 1;
      ++count;
    }
  }
};

// Walks trie nodes [first, last) in preorder from memo state `from` (the state at the parent of
// `first`), allowing the tokens of every node the grammar accepts.
void walk(const TokenTrie& trie, const Grammar& g, WalkMemo& memo, size_t first, size_t last,
          int32_t from, Allower& allow) {
  thread_local std::vector<int32_t> at;
  at.resize(trie.max_depth() + 1);
  if (first >= last) return;
  at[trie.depth(first) - 1] = from;
  for (size_t i = first; i < last;) {
    const uint32_t d = trie.depth(i);
    const int32_t s = memo.step(g, at[d - 1], trie.byte(i));
    if (s < 0) {  // refused: so is every token below
      i = trie.subtree_end(i);
      continue;
    }
    at[d] = s;
    for (const int32_t* id = trie.tokens_begin(i); id != trie.tokens_end(i); ++id) allow(*id);
    ++i;
  }
}

// The suffix classes of the state's stacks, when at most `max_new` of them are not cached yet
// (computing a class walks the whole trie: a state with many new suffixes walks it once, plain).
bool suffix_classes(const TokenTrie& trie, const GrammarMatcher& matcher, int64_t vocab,
                    size_t max_new, std::vector<std::shared_ptr<const GrammarSuffixClass>>& out) {
  const std::vector<uint32_t>& d = matcher.state().data;
  struct Suffix {
    std::span<const uint32_t> positions;
    bool whole;
  };
  std::vector<Suffix> missing;
  out.clear();
  for (size_t i = 0; i < d.size(); i += d[i] + 1) {
    const uint32_t len = d[i];
    if (len == 0) continue;
    const size_t k = std::min<size_t>(len, kGrammarSuffixLength);
    const Suffix s{std::span<const uint32_t>(d.data() + i + 1 + (len - k), k), k == len};
    if (auto c =
            cached_grammar_suffix_class(trie, matcher.grammar(), s.positions, s.whole, vocab)) {
      out.push_back(std::move(c));
    } else {
      missing.push_back(s);
    }
  }
  if (missing.size() > max_new) return false;
  for (const Suffix& s : missing) {
    out.push_back(grammar_suffix_class(trie, matcher.grammar_ptr(), s.positions, s.whole, vocab));
  }
  return true;
}

}  // namespace

int64_t grammar_allowed_tokens_plain(const TokenTrie& trie, const GrammarMatcher& matcher,
                                     std::span<const int32_t> end_ids, std::span<uint8_t> allowed) {
  std::fill(allowed.begin(), allowed.end(), uint8_t{0});
  Allower allow{allowed};
  thread_local WalkMemo memo;
  memo.reset(matcher.state());
  if (trie.size() > 1) walk(trie, matcher.grammar(), memo, 1, trie.size(), 0, allow);
  if (matcher.complete()) {
    for (int32_t id : end_ids) allow(id);
  }
  return allow.count;
}

int64_t grammar_allowed_tokens(const TokenTrie& trie, const GrammarMatcher& matcher,
                               std::span<const int32_t> end_ids, std::span<uint8_t> allowed) {
  const auto vocab = static_cast<int64_t>(allowed.size());
  thread_local std::vector<std::shared_ptr<const GrammarSuffixClass>> classes;
  if (!suffix_classes(trie, matcher, vocab, 1, classes)) {
    return grammar_allowed_tokens_plain(trie, matcher, end_ids, allowed);
  }
  // Accepted by some stack's top alone.
  thread_local std::vector<uint64_t> bits;
  bits.assign(static_cast<size_t>((vocab + 63) / 64), 0);
  for (const auto& c : classes) {
    for (size_t w = 0; w < bits.size(); ++w) bits[w] |= c->accepted[w];
  }
  Allower allow{allowed};
  for (size_t w = 0; w < bits.size(); ++w) {
    for (size_t b = 0; b < 64; ++b) {
      const size_t id = w * 64 + b;
      if (id >= allowed.size()) break;
      allowed[id] = static_cast<uint8_t>(bits[w] >> b & 1);
    }
    allow.count += std::popcount(bits[w]);
  }
  // The open subtrees, against the whole state (each walked once: roots sorted, nested ones
  // skipped).
  thread_local std::vector<const GrammarSuffixClass::Open*> roots;
  roots.clear();
  for (const auto& c : classes) {
    for (const GrammarSuffixClass::Open& o : c->open) roots.push_back(&o);
  }
  std::sort(roots.begin(), roots.end(),
            [](const auto* a, const auto* b) { return a->node < b->node; });
  thread_local WalkMemo memo;
  memo.reset(matcher.state());
  const Grammar& g = matcher.grammar();
  uint32_t covered_to = 0;
  for (const GrammarSuffixClass::Open* o : roots) {
    if (o->node < covered_to) continue;
    covered_to = trie.subtree_end(o->node);
    int32_t s = 0;
    for (char c : o->path) {
      s = memo.step(g, s, static_cast<uint8_t>(c));
      if (s < 0) break;
    }
    if (s >= 0) walk(trie, g, memo, o->node, trie.subtree_end(o->node), s, allow);
  }
  if (matcher.complete()) {
    for (int32_t id : end_ids) allow(id);
  }
  return allow.count;
}

}  // namespace kiln::engine
