// Scheduler: what a step's outputs do to its requests (sampling under the JSON constraint,
// prompt scoring, events), and the constraint's token masks, prefetched while the forward pass
// runs (constraint_masks.h).
#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/scheduler.h"
#include "kiln/engine/scheduler_sequence.h"

namespace kiln::engine {

void Scheduler::prefetch_masks(const StepBatch& batch, const std::vector<Sequence*>& members) {
  std::vector<ConstraintMasks::Row> rows;
  for (size_t i = 0; i < members.size(); ++i) {
    const Sequence& seq = *members[i];
    const StepSequence& ss = batch.seqs[i];
    // Only rows that sample: the sequence's last row, once the step reaches its end.
    if (!seq.json || !ss.want_logits || ss.seq_len < static_cast<int64_t>(seq.tokens.size())) {
      continue;
    }
    rows.push_back({*seq.json, seq.json_end_ids});
    // Verify row j samples after the first j proposals (when they were accepted): the states
    // along the draft. A proposal the constraint refuses ends the path (it is not accepted).
    JsonMatcher along = *seq.json;
    for (int32_t proposal : seq.draft) {
      const std::optional<std::string> bytes = tokenizer_->token_bytes(proposal);
      if (!bytes || !along.feed(*bytes) || along.complete()) break;
      rows.push_back({along, seq.json_end_ids});
    }
  }
  masks_.prefetch(std::move(rows));
}

// Opens the constraint when the output reaches one of sampling.json_after. Bytes of the same token
// after the marker start the value; where they cannot, this value goes unconstrained (the
// token is already chosen) and the marker is looked for again.
void Scheduler::watch_json_marker(Sequence& seq, int32_t token) {
  // The markers as the output shows them: with skip_special_tokens false a control token's text
  // counts ("[TOOL_CALLS]" is one in Mistral's vocabularies).
  const size_t before = seq.json_tail.size();
  tokenizer_->append_token_text(token, seq.request.skip_special_tokens, seq.json_tail);
  if (seq.json_tail.size() == before) return;
  // The marker that ends last (markers may overlap: the latest one opens the value).
  size_t value_at = std::string::npos, longest = 0;
  for (const std::string& marker : seq.request.sampling.json_after) {
    longest = std::max(longest, marker.size());
    const size_t at = seq.json_tail.rfind(marker);
    if (at != std::string::npos &&
        (value_at == std::string::npos || at + marker.size() > value_at)) {
      value_at = at + marker.size();
    }
  }
  if (value_at == std::string::npos) {
    if (seq.json_tail.size() >= longest) {
      seq.json_tail.erase(0, seq.json_tail.size() - (longest - 1));
    }
    return;
  }
  const std::string rest = seq.json_tail.substr(value_at);
  seq.json_tail.clear();
  seq.json.emplace(seq.request.sampling.json_schema, /*leading_space=*/true);
  if (!seq.json->feed(rest) || seq.json->complete()) seq.json.reset();
}

void Scheduler::constrain_to_json(Sequence& seq, std::span<float> logits) {
  const std::shared_ptr<const TokenMask> mask = masks_.mask(*seq.json, seq.json_end_ids);
  KILN_CHECK(mask->allowed_count() > 0,
             "the JSON constraint allows no token of this vocabulary here");
  mask->apply(logits);
}

void Scheduler::run_batch(StepBatch& batch, const std::vector<Sequence*>& members, BatchRows rows) {
  // Greedy fast path: the LM head then only returns argmax ids.
  bool greedy_only = true;
  const int64_t n_logits = batch.logit_rows();
  std::vector<int64_t> rows_of(members.size(), 0);
  for (int32_t s : batch.token_seq) ++rows_of[static_cast<size_t>(s)];
  for (size_t i = 0; i < members.size(); ++i) {
    if (!batch.seqs[i].want_logits) continue;
    // Verify rows (proposals) want the argmax of every row: greedy ids serve them too.
    const bool scoring = batch.seqs[i].all_logits && members[i]->draft.empty();
    greedy_only &= !scoring && members[i]->sampler.greedy_fast_path_ok() &&
                   members[i]->stop.banned_ids().empty();
  }
  batch.greedy_only = greedy_only && n_logits > 0;

  output_.logits.clear();
  output_.greedy_ids.clear();
  output_.vocab = 0;
  output_.used_graph = false;
  std::string error;
  const auto start = std::chrono::steady_clock::now();
  prefetch_masks(batch, members);
  try {
    executor_->forward(batch, output_);
    const double forward_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The mask time the forward pass did not hide is part of what the step's rows cost (the
    // speculation policy prices verify rows with it).
    const double mask_wait = masks_.finish();
    stats_.json_mask_wait_seconds += mask_wait;
    const double seconds = forward_seconds + mask_wait;
    // Decode and verify steps (every row returns a token) teach the speculation policy what
    // rows cost; without speculation nobody reads it.
    if (config_.speculative.enabled() && batch.returns_every_row())
      step_costs_.record(batch.num_tokens(), seconds);
    const bool graph = output_.used_graph;
    const StepKind kind = rows == BatchRows::Prompt            ? StepKind::Prefill
                          : rows == BatchRows::PromptAndDecode ? StepKind::Mixed
                          : batch.is_decode()
                              ? (graph ? StepKind::DecodeGraph : StepKind::DecodeEager)
                              : (graph ? StepKind::VerifyGraph : StepKind::VerifyEager);
    StepTime& t = stats_.step_time[static_cast<size_t>(kind)];
    ++t.steps;
    t.rows += batch.num_tokens();
    t.seconds += seconds;
    if (batch.greedy_only) {
      KILN_CHECK(static_cast<int64_t>(output_.greedy_ids.size()) == n_logits,
                 "the executor returned {} greedy ids for {} rows", output_.greedy_ids.size(),
                 n_logits);
    } else {
      KILN_CHECK(output_.vocab == vocab_ &&
                     static_cast<int64_t>(output_.logits.size()) == n_logits * vocab_,
                 "the executor returned {} logits of vocab {} for {} rows of vocab {}",
                 output_.logits.size(), output_.vocab, n_logits, vocab_);
    }
  } catch (const std::exception& e) {
    masks_.finish();
    error = e.what();
  }
  if (!error.empty()) {
    KILN_LOG_ERROR("forward step of {} sequences failed: {}", members.size(), error);
    for (Sequence* seq : members) {
      RequestEvent ev;
      ev.finish_reason = FinishReason::Abort;
      ev.error = "model execution failed: " + error;
      finish(*seq, ev);
    }
    return;
  }
  if (output_.used_graph) {
    ++stats_.graph_steps;
  } else {
    ++stats_.eager_steps;
  }

  int64_t next_row = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    Sequence& seq = *members[i];
    const StepSequence& ss = batch.seqs[i];
    // This sequence's logits rows: none, its last row, or (scoring) all its rows, the last of
    // which predicts the token after the prompt.
    const int64_t n_rows = !ss.want_logits ? 0 : ss.all_logits ? rows_of[i] : 1;
    const int64_t first_row = next_row;
    next_row += n_rows;
    if (!seq.draft.empty()) {
      accept_proposals(seq, first_row, n_rows, batch.greedy_only);
      continue;
    }
    if (config_.speculative.enabled() && seq.state == Sequence::State::Decoding)
      ++seq.spec_verify_ct;
    seq.n_kv = ss.seq_len;
    if (ss.all_logits) {
      try {
        score_prompt_rows(seq, ss.seq_len - rows_of[i], rows_of[i], first_row);
      } catch (const std::exception& e) {
        RequestEvent ev;
        ev.finish_reason = FinishReason::Abort;
        ev.error = std::string("scoring the prompt failed: ") + e.what();
        finish(seq, ev);
        continue;
      }
    }
    // Only a step that reaches the end of the sequence samples.
    if (n_rows == 0 || seq.n_kv < static_cast<int64_t>(seq.tokens.size())) {
      cache_computed_prefix(seq);
      continue;
    }
    const int64_t r = first_row + n_rows - 1;
    seq.state = Sequence::State::Decoding;
    cache_computed_prefix(seq);
    RequestEvent ev;
    if (!seq.scores_sent) {
      ev.prompt_logprobs = std::move(seq.scores);
      seq.scores_sent = true;
    }
    if (seq.request.stop.max_new_tokens == 0) {  // scoring only
      ev.finish_reason = FinishReason::Length;
      finish(seq, ev);
      continue;
    }
    int32_t token = 0;
    try {
      if (batch.greedy_only) {
        token = output_.greedy_ids[static_cast<size_t>(r)];
        KILN_CHECK(token >= 0 && token < vocab_, "the executor returned token id {}", token);
      } else {
        std::span<float> logits(output_.logits.data() + r * vocab_, static_cast<size_t>(vocab_));
        if (seq.json) constrain_to_json(seq, logits);
        TokenLogprob lp;
        token = seq.sampler.sample(logits, seq.stop.banned_ids(),
                                   seq.request.logprobs >= 0 ? &lp : nullptr);
        if (seq.request.logprobs >= 0) ev.logprobs.push_back(std::move(lp));
      }
    } catch (const std::exception& e) {
      ev.finish_reason = FinishReason::Abort;
      ev.error = std::string("sampling failed: ") + e.what();
      finish(seq, ev);
      continue;
    }
    if (!feed_json(seq, token)) {  // the mask allowed it: cannot happen
      ev.finish_reason = FinishReason::Abort;
      ev.error = fmt::format("internal error: token {} broke the JSON constraint", token);
      finish(seq, ev);
      continue;
    }
    seq.tokens.push_back(token);
    seq.sampler.add_output(token);
    ++stats_.generated_tokens_total;
    StopUpdate u = seq.stop.on_token(token);
    ev.new_tokens.push_back(token);
    ev.text_delta = std::move(u.text_delta);
    if (u.finished) {
      ev.finish_reason = u.reason;
      ev.matched_stop = std::move(u.matched_stop);
      ev.matched_stop_token = u.matched_stop_token;
      finish(seq, ev);
    } else {
      emit(seq, ev);
    }
  }
}

void Scheduler::score_prompt_rows(Sequence& seq, int64_t first_pos, int64_t n_rows,
                                  int64_t first_row) {
  // Row j holds position first_pos + j and predicts the token at first_pos + j + 1.
  const int top = std::max(seq.request.logprobs, 0);
  for (int64_t j = 0; j < n_rows; ++j) {
    const int64_t target = first_pos + j + 1;
    if (target != seq.score_from + static_cast<int64_t>(seq.scores.size()) ||
        target >= seq.n_prompt)
      continue;
    std::span<const float> logits(output_.logits.data() + (first_row + j) * vocab_,
                                  static_cast<size_t>(vocab_));
    seq.scores.push_back(score_token(logits, seq.tokens[static_cast<size_t>(target)], top));
  }
}

bool Scheduler::feed_json(Sequence& seq, int32_t token) {
  const bool after_marker = !seq.request.sampling.json_after.empty();
  if (!seq.json) {
    // A constraint that waits for its marker: this token may complete the marker.
    if (after_marker) watch_json_marker(seq, token);
    return true;
  }
  const bool ends =
      std::find(seq.json_end_ids.begin(), seq.json_end_ids.end(), token) != seq.json_end_ids.end();
  if (ends) return true;
  const std::optional<std::string> bytes = tokenizer_->token_bytes(token);
  if (!bytes || !seq.json->feed(*bytes)) return false;
  // After a marker, the constraint lifts once its value is complete (the next marker opens it
  // again).
  if (after_marker && seq.json->complete()) seq.json.reset();
  return true;
}

}  // namespace kiln::engine
