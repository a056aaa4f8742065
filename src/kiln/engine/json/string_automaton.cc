#include "kiln/engine/json/string_automaton.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace kiln::engine {

CodePointSet normalized(CodePointSet s) {
  std::sort(s.begin(), s.end(),
            [](const CodePointRange& a, const CodePointRange& b) { return a.lo < b.lo; });
  CodePointSet out;
  for (const CodePointRange& r : s) {
    if (r.lo > r.hi) continue;
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

CodePointSet complement(const CodePointSet& s) {
  constexpr uint32_t kMaxCodePoint = 0x10FFFF;
  CodePointSet out;
  uint32_t from = 0;
  for (const CodePointRange& r : s) {
    if (r.lo > from) out.push_back({from, r.lo - 1});
    from = r.hi + 1;
  }
  if (from <= kMaxCodePoint) out.push_back({from, kMaxCodePoint});
  return out;
}

CodePointSet intersection(const CodePointSet& a, const CodePointSet& b) {
  CodePointSet out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint32_t lo = std::max(a[i].lo, b[j].lo), hi = std::min(a[i].hi, b[j].hi);
    if (lo <= hi) out.push_back({lo, hi});
    (a[i].hi < b[j].hi) ? ++i : ++j;
  }
  return out;
}

const CodePointSet& writable_code_points() {
  // \b \t \n (8-10), \f \r (12-13), printable ASCII and beyond, without the surrogates.
  static const CodePointSet kWritable = {
      {0x08, 0x0A}, {0x0C, 0x0D}, {0x20, 0xD7FF}, {0xE000, 0x10FFFF}};
  return kWritable;
}

namespace {

// Index of the edge whose range holds cp or, if none, the first edge after it.
size_t edge_at_or_after(const std::vector<StringAutomaton::Edge>& edges, uint32_t cp) {
  const auto it = std::partition_point(edges.begin(), edges.end(),
                                       [cp](const StringAutomaton::Edge& e) { return e.hi < cp; });
  return static_cast<size_t>(it - edges.begin());
}

}  // namespace

int64_t StringAutomaton::next(uint32_t state, uint32_t cp) const {
  const auto& e = edges_[state];
  const size_t i = edge_at_or_after(e, cp);
  return i < e.size() && e[i].lo <= cp ? int64_t{e[i].to} : -1;
}

bool StringAutomaton::has_edge_within(uint32_t state, uint32_t lo, uint32_t hi) const {
  const auto& e = edges_[state];
  const size_t i = edge_at_or_after(e, lo);
  return i < e.size() && e[i].lo <= hi;
}

uint32_t StringAutomaton::add_state(bool accepting) {
  if (edges_.size() >= kMaxStates) throw std::length_error("too many automaton states");
  edges_.emplace_back();
  accepting_.push_back(accepting ? 1 : 0);
  return static_cast<uint32_t>(edges_.size() - 1);
}

void StringAutomaton::add_edge(uint32_t from, uint32_t lo, uint32_t hi, uint32_t to) {
  auto& e = edges_[from];
  if (!e.empty() && e.back().to == to && e.back().hi + 1 == lo) {
    e.back().hi = hi;
  } else {
    e.push_back({lo, hi, to});
  }
}

uint32_t StringAutomaton::merge_universal_states(const std::vector<uint8_t>& live,
                                                 const std::vector<std::vector<uint32_t>>& into) {
  // Universal: accepting, and every writable character leads to a universal state (the
  // greatest such set). All accept the same strings (all of them), so they become one state
  // that loops on itself: an unanchored pattern's tail is then recognisable
  // (loops_on_everything) however it was reached.
  const size_t n = edges_.size();
  const CodePointSet& all = writable_code_points();
  std::vector<uint8_t> universal(n, 0);
  for (uint32_t s = 0; s < n; ++s) {
    if (!live[s] || !accepting_[s]) continue;
    CodePointSet covered;
    for (const Edge& e : edges_[s]) covered.push_back({e.lo, e.hi});
    covered = normalized(std::move(covered));
    universal[s] = std::equal(covered.begin(), covered.end(), all.begin(), all.end(),
                              [](const CodePointRange& a, const CodePointRange& b) {
                                return a.lo == b.lo && a.hi == b.hi;
                              });
  }
  // A candidate with an edge to a state that is not universal is not universal either: walk
  // back from every non-universal state over reversed edges, each state and edge once (a
  // fixpoint loop that drops one state per pass is quadratic: maxLength 30,000 beside an
  // unanchored pattern took ~10^9 steps).
  std::vector<uint32_t> work;
  for (uint32_t s = 0; s < n; ++s) {
    if (!universal[s]) work.push_back(s);
  }
  while (!work.empty()) {
    const uint32_t t = work.back();
    work.pop_back();
    for (uint32_t p : into[t]) {
      if (universal[p]) universal[p] = 0, work.push_back(p);
    }
  }
  uint32_t rep = UINT32_MAX;
  for (uint32_t s = 0; s < n && rep == UINT32_MAX; ++s) {
    if (universal[s]) rep = s;
  }
  if (rep == UINT32_MAX) return rep;
  for (uint32_t s = 0; s < n; ++s) {
    for (Edge& e : edges_[s]) {
      if (universal[e.to]) e.to = rep;
    }
  }
  edges_[rep].clear();
  for (const CodePointRange& r : all) edges_[rep].push_back({r.lo, r.hi, rep});
  return rep;
}

bool StringAutomaton::trim(ConstraintBudget& budget) {
  const size_t n = edges_.size();
  if (n == 0) return false;
  size_t edge_count = 0;
  for (const auto& e : edges_) edge_count += e.size();
  // Each pass below (reversed edges, live states, universal states, renumbering) visits every
  // state and edge at most a few times.
  budget.charge(4 * (uint64_t{n} + edge_count));
  // Live: reaches an accepting state (backwards from them over reversed edges).
  std::vector<std::vector<uint32_t>> into(n);
  for (uint32_t s = 0; s < n; ++s) {
    for (const Edge& e : edges_[s]) into[e.to].push_back(s);
  }
  std::vector<uint8_t> live(n, 0);
  std::vector<uint32_t> work;
  for (uint32_t s = 0; s < n; ++s) {
    if (accepting_[s]) live[s] = 1, work.push_back(s);
  }
  while (!work.empty()) {
    const uint32_t s = work.back();
    work.pop_back();
    for (uint32_t p : into[s]) {
      if (!live[p]) live[p] = 1, work.push_back(p);
    }
  }
  if (!live[0]) {
    edges_.clear();
    accepting_.clear();
    return false;
  }
  const uint32_t universal = merge_universal_states(live, into);
  // Renumber the live states reachable from the start, in the order they are found.
  std::vector<int64_t> index(n, -1);
  std::vector<uint32_t> order = {0};
  index[0] = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    for (const Edge& e : edges_[order[k]]) {
      if (live[e.to] && index[e.to] < 0) {
        index[e.to] = static_cast<int64_t>(order.size());
        order.push_back(e.to);
      }
    }
  }
  StringAutomaton out;
  for (uint32_t s : order) out.add_state(accepting_[s] != 0);
  for (size_t k = 0; k < order.size(); ++k) {
    for (const Edge& e : edges_[order[k]]) {
      if (live[e.to])
        out.add_edge(static_cast<uint32_t>(k), e.lo, e.hi, static_cast<uint32_t>(index[e.to]));
    }
  }
  out.universal_.assign(out.edges_.size(), 0);
  if (universal != UINT32_MAX && index[universal] >= 0) out.universal_[index[universal]] = 1;
  *this = std::move(out);
  return true;
}

StringAutomaton StringAutomaton::intersect(const StringAutomaton& a, const StringAutomaton& b,
                                           ConstraintBudget& budget) {
  StringAutomaton out;
  std::unordered_map<uint64_t, uint32_t> index;  // (state of a, state of b) -> state
  std::vector<std::pair<uint32_t, uint32_t>> order;
  auto state_of = [&](uint32_t sa, uint32_t sb) {
    const auto [it, added] = index.try_emplace((uint64_t{sa} << 32) | sb, 0);
    if (added) {
      it->second = out.add_state(a.accepting(sa) && b.accepting(sb));
      order.emplace_back(sa, sb);
    }
    return it->second;
  };
  state_of(0, 0);
  for (size_t k = 0; k < order.size(); ++k) {
    const auto [sa, sb] = order[k];
    const auto& ea = a.edges_[sa];
    const auto& eb = b.edges_[sb];
    // Each edge made here is stored, then copied by trim(): two steps.
    budget.charge(1 + 2 * (ea.size() + eb.size()));
    size_t i = 0, j = 0;
    while (i < ea.size() && j < eb.size()) {  // both sorted: one merge pass
      const uint32_t lo = std::max(ea[i].lo, eb[j].lo), hi = std::min(ea[i].hi, eb[j].hi);
      if (lo <= hi) {
        const uint32_t to = state_of(ea[i].to, eb[j].to);
        out.add_edge(static_cast<uint32_t>(k), lo, hi, to);
      }
      (ea[i].hi < eb[j].hi) ? ++i : ++j;
    }
  }
  return out;
}

StringAutomaton StringAutomaton::length_between(uint32_t min_chars, uint32_t max_chars,
                                                ConstraintBudget& budget) {
  // State k: k characters so far; with no upper limit the last state (min_chars) loops.
  const bool unbounded = max_chars == UINT32_MAX;
  const uint32_t last = unbounded ? min_chars : max_chars;
  if (last >= kMaxStates) throw std::length_error("too many automaton states");
  budget.charge((uint64_t{last} + 1) * (1 + writable_code_points().size()));
  StringAutomaton out;
  for (uint32_t k = 0; k <= last; ++k) out.add_state(k >= min_chars);
  for (uint32_t k = 0; k <= last; ++k) {
    const uint32_t to = k < last ? k + 1 : unbounded ? k : UINT32_MAX;
    if (to == UINT32_MAX) continue;
    for (const CodePointRange& r : writable_code_points()) out.add_edge(k, r.lo, r.hi, to);
  }
  return out;
}

}  // namespace kiln::engine
