#include "kiln/engine/grammar/grammar_matcher.h"

#include <algorithm>
#include <unordered_set>

namespace kiln::engine {

namespace {

using Stack = std::vector<uint32_t>;

struct StackHash {
  size_t operator()(const Stack& s) const {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint32_t x : s) h = (h ^ x) * 0x100000001b3ULL;
    return static_cast<size_t>(h);
  }
};

// Scratch reused across calls on each thread: no allocation per byte once warm.
struct Scratch {
  std::vector<Stack> stacks;
  size_t used = 0;
  // The stacks whose top rule was already expanded for this byte: reached again along another
  // path (through rules that can be empty), they would only produce the same stacks again.
  std::unordered_set<Stack, StackHash> expanded;
  void reset() {
    used = 0;
    expanded.clear();
  }
  Stack& next() {
    if (used == stacks.size()) stacks.emplace_back();
    return stacks[used++];
  }
};

// Expands `stack` (its top may be a rule) into stacks whose tops are byte sets, or empty.
// Returns false once a bound is passed: the stack's depth, the expansions produced before
// deduplication (a chain of rules that can be empty can reach the same stacks along
// exponentially many paths), or the recursion itself (chains of empty rules are long).
bool expand(const Grammar& g, Stack& stack, Scratch& out, size_t recursion = 0) {
  if (stack.size() > kMaxGrammarDepth || recursion > kMaxGrammarExpansion) return false;
  if (stack.empty() || g.kind[stack.back()] == Grammar::kBytes) {
    if (out.used >= kMaxGrammarStacks * 4) return false;
    out.next() = stack;
    return true;
  }
  if (!out.expanded.insert(stack).second) return true;
  const uint32_t top = stack.back();
  const uint32_t rule = g.value[top];
  stack.pop_back();
  if (!g.is_end(top + 1)) stack.push_back(top + 1);
  const size_t base = stack.size();
  for (uint32_t alt : g.alternatives[rule]) {
    stack.resize(base);
    if (!g.is_end(alt)) stack.push_back(alt);
    if (!expand(g, stack, out, recursion + 1)) return false;
  }
  // Restored for the caller (it may reuse the stack).
  stack.resize(base);
  if (!g.is_end(top + 1)) stack.pop_back();
  stack.push_back(top);
  return true;
}

bool store(Scratch& s, GrammarState& state) {
  auto begin = s.stacks.begin(), end = s.stacks.begin() + static_cast<std::ptrdiff_t>(s.used);
  std::sort(begin, end);
  end = std::unique(begin, end);
  const auto n = static_cast<size_t>(end - begin);
  if (n == 0 || n > kMaxGrammarStacks) return false;
  state.data.clear();
  for (auto it = begin; it != end; ++it) {
    state.data.push_back(static_cast<uint32_t>(it->size()));
    state.data.insert(state.data.end(), it->begin(), it->end());
  }
  return true;
}

}  // namespace

GrammarState grammar_start(const Grammar& g) {
  thread_local Scratch scratch;
  scratch.reset();
  Stack stack{0};
  GrammarState state;
  // The checks at compile time leave the start expandable within the bounds but for a grammar
  // nested past kMaxGrammarDepth at its first byte; that state accepts nothing.
  if (!expand(g, stack, scratch) || !store(scratch, state)) state.data.clear();
  return state;
}

bool grammar_feed(const Grammar& g, GrammarState& state, uint8_t byte) {
  thread_local Scratch scratch;
  thread_local Stack stack;
  scratch.reset();
  const std::vector<uint32_t>& d = state.data;
  for (size_t i = 0; i < d.size();) {
    const uint32_t len = d[i];
    const size_t first = i + 1;
    i = first + len;
    if (len == 0) continue;  // finished: nothing more can follow on this stack
    const uint32_t top = d[i - 1];
    if (!byte_set_has(g.byte_sets[g.value[top]], byte)) continue;
    stack.assign(d.begin() + static_cast<std::ptrdiff_t>(first),
                 d.begin() + static_cast<std::ptrdiff_t>(i - 1));
    if (!g.is_end(top + 1)) stack.push_back(top + 1);
    if (!expand(g, stack, scratch)) return false;
  }
  return store(scratch, state);
}

bool grammar_complete(const GrammarState& state) {
  const std::vector<uint32_t>& d = state.data;
  for (size_t i = 0; i < d.size(); i += d[i] + 1) {
    if (d[i] == 0) return true;
  }
  return false;
}

}  // namespace kiln::engine
