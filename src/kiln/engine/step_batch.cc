#include "kiln/engine/step_batch.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace kiln::engine {

int32_t StepBatch::add_sequence(std::span<const int32_t> tokens, int64_t first_pos,
                                std::span<const int32_t> pages, int page_size, bool want_logits,
                                bool all_logits) {
  const auto s = static_cast<int32_t>(seqs.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t pos = first_pos + static_cast<int64_t>(i);
    token_ids.push_back(tokens[i]);
    positions.push_back(static_cast<int32_t>(pos));
    token_seq.push_back(s);
    slots.push_back(pages[static_cast<size_t>(pos / page_size)] * page_size +
                    static_cast<int32_t>(pos % page_size));
  }
  StepSequence ss;
  ss.pages.assign(pages.begin(), pages.end());
  ss.seq_len = static_cast<int32_t>(first_pos + static_cast<int64_t>(tokens.size()));
  ss.want_logits = want_logits;
  ss.all_logits = all_logits;
  seqs.push_back(std::move(ss));
  return s;
}

namespace {

// The rows a flag pair selects, in batch order of sequences: none, a sequence's last row, or
// every row it has in the step.
template <class Want>
std::vector<int32_t> selected_rows(const StepBatch& b, Want want) {
  std::vector<std::vector<int32_t>> rows(b.seqs.size());
  for (std::size_t t = 0; t < b.token_seq.size(); ++t)
    rows[static_cast<std::size_t>(b.token_seq[t])].push_back(static_cast<int32_t>(t));
  std::vector<int32_t> out;
  for (std::size_t s = 0; s < b.seqs.size(); ++s) {
    const auto [wanted, all] = want(b.seqs[s]);
    if (!wanted || rows[s].empty()) continue;
    if (all) {
      out.insert(out.end(), rows[s].begin(), rows[s].end());
    } else {
      out.push_back(rows[s].back());
    }
  }
  return out;
}

template <class Want>
int64_t selected_count(const StepBatch& b, Want want) {
  int64_t n = 0;
  std::vector<int64_t> count(b.seqs.size(), 0);
  for (int32_t s : b.token_seq) ++count[static_cast<std::size_t>(s)];
  for (std::size_t s = 0; s < b.seqs.size(); ++s) {
    const auto [wanted, all] = want(b.seqs[s]);
    if (wanted && count[s] > 0) n += all ? count[s] : 1;
  }
  return n;
}

std::pair<bool, bool> logits_of(const StepSequence& s) { return {s.want_logits, s.all_logits}; }
std::pair<bool, bool> hidden_of(const StepSequence& s) { return {s.want_hidden, s.all_hidden}; }

}  // namespace

// A sequence's last row is the one it samples from.
std::vector<int32_t> StepBatch::logit_row_indices() const {
  return selected_rows(*this, logits_of);
}
int64_t StepBatch::logit_rows() const { return selected_count(*this, logits_of); }
std::vector<int32_t> StepBatch::hidden_row_indices() const {
  return selected_rows(*this, hidden_of);
}
int64_t StepBatch::hidden_rows() const {
  // Asked every step (the executor's replay check): decode steps have none, found without
  // counting rows.
  if (std::none_of(seqs.begin(), seqs.end(), [](const StepSequence& s) { return s.want_hidden; }))
    return 0;
  return selected_count(*this, hidden_of);
}

bool StepBatch::returns_every_row() const {
  for (std::size_t t = 1; t < token_seq.size(); ++t) {
    if (token_seq[t] < token_seq[t - 1]) return false;
  }
  return logit_rows() == num_tokens();
}

}  // namespace kiln::engine
