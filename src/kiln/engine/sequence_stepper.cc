#include "kiln/engine/sequence_stepper.h"

#include <algorithm>

#include "kiln/base/error.h"

namespace kiln::engine {

// clang-analyzer takes KvPool::free for libc free (as in kv_pool.cc).
// NOLINTBEGIN(clang-analyzer-unix.Malloc)
void SequenceStepper::release(SteppedSequence& seq) {
  pool_.free(seq.pages);
  seq.pages.clear();
  seq.len = 0;
}
// NOLINTEND(clang-analyzer-unix.Malloc)

int32_t argmax_row(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

StepBatch SequenceStepper::batch_of(const std::vector<SteppedSequence*>& seqs,
                                    const std::vector<std::vector<int32_t>>& tokens) {
  StepBatch b;
  const int page = pool_.page_size();
  for (size_t s = 0; s < seqs.size(); ++s) {
    SteppedSequence& q = *seqs[s];
    const int64_t need = (q.len + static_cast<int64_t>(tokens[s].size()) + page - 1) / page;
    if (need > static_cast<int64_t>(q.pages.size()) &&
        !pool_.alloc(need - static_cast<int64_t>(q.pages.size()), q.pages))
      throw Error("the KV pool has no free pages left");
    b.add_sequence(tokens[s], q.len, q.pages, page, /*want_logits=*/true, /*all_logits=*/false);
    q.len += static_cast<int32_t>(tokens[s].size());
  }
  return b;
}

std::vector<float> SequenceStepper::step_all_rows(SteppedSequence& seq,
                                                  const std::vector<int32_t>& tokens) {
  StepBatch b = batch_of({&seq}, {tokens});
  b.seqs[0].all_logits = true;
  StepOutput out;
  exec_.forward(b, out);
  KILN_CHECK(
      static_cast<int64_t>(out.logits.size()) == static_cast<int64_t>(tokens.size()) * out.vocab,
      "the executor returned {} logits for {} rows", out.logits.size(), tokens.size());
  return std::move(out.logits);
}

std::vector<float> SequenceStepper::step_hidden(SteppedSequence& seq,
                                                const std::vector<int32_t>& tokens, bool all_rows) {
  StepBatch b = batch_of({&seq}, {tokens});
  b.seqs[0].want_logits = false;
  b.seqs[0].want_hidden = true;
  b.seqs[0].all_hidden = all_rows;
  StepOutput out;
  exec_.forward(b, out);
  const int64_t rows = all_rows ? static_cast<int64_t>(tokens.size()) : 1;
  KILN_CHECK(out.hidden_dim > 0 && static_cast<int64_t>(out.hidden.size()) == rows * out.hidden_dim,
             "the executor returned {} hidden values for {} rows", out.hidden.size(), rows);
  return std::move(out.hidden);
}

std::vector<std::vector<float>> SequenceStepper::step(
    const std::vector<SteppedSequence*>& seqs, const std::vector<std::vector<int32_t>>& tokens,
    bool greedy, bool* used_graph) {
  StepBatch b = batch_of(seqs, tokens);
  b.greedy_only = greedy;
  StepOutput out;
  exec_.forward(b, out);
  if (used_graph != nullptr) *used_graph = out.used_graph;
  std::vector<std::vector<float>> rows(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    if (greedy) {
      rows[s] = {static_cast<float>(out.greedy_ids.at(s))};
    } else {
      rows[s].assign(out.logits.begin() + s * out.vocab, out.logits.begin() + (s + 1) * out.vocab);
    }
  }
  return rows;
}

std::vector<int32_t> SequenceStepper::greedy(SteppedSequence& seq, int32_t first_token, int n,
                                             bool greedy_plans) {
  std::vector<int32_t> out;
  int32_t tok = first_token;
  for (int i = 0; i < n; ++i) {
    auto rows = step({&seq}, {{tok}}, greedy_plans);
    tok = greedy_plans ? static_cast<int32_t>(rows[0][0]) : argmax_row(rows[0]);
    out.push_back(tok);
  }
  return out;
}

}  // namespace kiln::engine
