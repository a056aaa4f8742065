#include "kiln/engine/step_batch.h"

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

std::vector<int32_t> StepBatch::logit_row_indices() const {
  // Rows of each sequence in batch order; a sequence's last row is the one it samples from.
  std::vector<std::vector<int32_t>> rows(seqs.size());
  for (std::size_t t = 0; t < token_seq.size(); ++t)
    rows[static_cast<std::size_t>(token_seq[t])].push_back(static_cast<int32_t>(t));
  std::vector<int32_t> out;
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    if (!seqs[s].want_logits || rows[s].empty()) continue;
    if (seqs[s].all_logits) {
      out.insert(out.end(), rows[s].begin(), rows[s].end());
    } else {
      out.push_back(rows[s].back());
    }
  }
  return out;
}

int64_t StepBatch::logit_rows() const {
  int64_t n = 0;
  std::vector<int64_t> count(seqs.size(), 0);
  for (int32_t s : token_seq) ++count[static_cast<std::size_t>(s)];
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    if (seqs[s].want_logits && count[s] > 0) n += seqs[s].all_logits ? count[s] : 1;
  }
  return n;
}

bool StepBatch::returns_every_row() const {
  for (std::size_t t = 1; t < token_seq.size(); ++t) {
    if (token_seq[t] < token_seq[t - 1]) return false;
  }
  return logit_rows() == num_tokens();
}

}  // namespace kiln::engine
