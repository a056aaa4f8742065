// One forward step over a batch of sequences, as the scheduler hands it to the model.
//
// Rows are tokens: prefill chunks (many rows of one sequence) and decode tokens (one row per
// sequence) may be mixed. Every row names its sequence (token_seq), its position, and the KV
// slot it writes (page * page_size + offset). Each sequence carries its block table (page
// ids in order) and its length after this step. The executor returns, for each sequence
// whose `want_logits` is set, the logits of its LAST row in this step, or of EVERY row it has
// in this step when `all_logits` is also set (prompt scoring); or only the greedy token when
// every such sequence samples greedily and `greedy_only` is set: the LM head then never
// writes logits. Independently, a sequence with `want_hidden` gets the final-norm hidden state
// of its last row (every row with `all_hidden`): embeddings from a decoder, whose rows share
// the step with generation rows. A step with hidden rows runs eagerly.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kiln::engine {

struct StepSequence {
  std::vector<int32_t> pages;  // block table: page ids holding positions 0.., in order
  int32_t seq_len = 0;         // tokens with K/V in the cache once this step has run
  bool want_logits = true;
  bool all_logits = false;  // with want_logits: a row of logits for each of its rows, in order
  bool want_hidden = false;
  bool all_hidden = false;  // with want_hidden: a hidden state for each of its rows, in order
};

struct StepBatch {
  std::vector<int32_t> token_ids;  // [T]
  std::vector<int32_t> positions;  // [T]
  std::vector<int32_t> token_seq;  // [T] index into seqs
  std::vector<int32_t> slots;      // [T] KV slot written by each row
  std::vector<StepSequence> seqs;  // [S]
  bool greedy_only = false;

  // Adds one sequence: a row for each of `tokens` at positions first_pos.., writing the K/V
  // slots its block table `pages` (page_size positions each) gives them, which must cover every
  // position. Returns the sequence's index. The one way rows are added: the scheduler's prompt
  // chunks, decode and verify rows, and the draft model's steps all go through it.
  int32_t add_sequence(std::span<const int32_t> tokens, int64_t first_pos,
                       std::span<const int32_t> pages, int page_size, bool want_logits,
                       bool all_logits);

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(seqs.size()); }
  // True when every sequence contributes exactly one row (a pure decode step).
  bool is_decode() const { return token_ids.size() == seqs.size(); }
  // Logits rows the executor returns: one per want_logits sequence, one per row for
  // all_logits sequences.
  int64_t logit_rows() const;
  // The batch rows whose logits are returned, in output order.
  std::vector<int32_t> logit_row_indices() const;
  // The same for hidden states (want_hidden / all_hidden).
  int64_t hidden_rows() const;
  std::vector<int32_t> hidden_row_indices() const;
  // Every row returns its logits (or greedy token) and rows are grouped by sequence in order,
  // so output row i is batch row i: a decode step, or a speculative verify step (a sequence's
  // last token and its proposals, the model's token after each).
  bool returns_every_row() const;
};

struct StepOutput {
  // For sequences with want_logits, in sequence order: logits rows [n, vocab] (row-major; a
  // sequence with all_logits contributes one per row it has in the step), unless greedy_only,
  // then only greedy_ids.
  std::vector<float> logits;
  std::vector<int32_t> greedy_ids;
  // For sequences with want_hidden, in sequence order: final-norm hidden states
  // [n, hidden_dim], one per row as want_hidden / all_hidden say.
  std::vector<float> hidden;
  int64_t hidden_dim = 0;
  int64_t vocab = 0;
  bool used_graph = false;  // the step replayed a captured plan (for metrics)
};

// How one step runs. Serving lets the model runner decide (Auto: a decode batch that fits a
// captured plan replays it, anything else runs eagerly); `kiln bench` forces each mode in turn
// to compare them, and under tensor parallelism every rank must run a step the same way.
enum class StepMode : uint8_t { Auto = 0, Eager = 1, Graph = 2 };

// What runs a step: the model runner (eager interpreter or graph runner). The scheduler only
// talks to this interface, so it can be tested with a fake model.
class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;
  virtual void forward(const StepBatch& batch, StepOutput& out) = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t context_length() const = 0;
};

}  // namespace kiln::engine
