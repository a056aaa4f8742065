#include "kiln/engine/model_runner.h"

#include <algorithm>
#include <cstring>

#include "kiln/base/error.h"

namespace kiln::engine {
namespace {

Tensor borrow_i32(const std::vector<int32_t>& v, const Shape& shape) {
  return Tensor::borrow(DType::I32, shape, const_cast<int32_t*>(v.data()));
}

std::string batch_name(const model::ForwardShape& shape) {
  return shape.logit_rows < 0 ? "decode" : "prefill";
}

}  // namespace

ModelRunner::ModelRunner(const model::ModelConfig& config, model::WeightStore& weights,
                         KvPool& pool, ThreadPool& threads, const ServingGeometry& geometry)
    : config_(config),
      weights_(weights),
      pool_(pool),
      geometry_(geometry),
      interpreter_(threads, weights, kv_geometry()) {}

graph::KvGeometry ModelRunner::kv_geometry() const {
  graph::KvGeometry g;
  g.n_layers = config_.n_layers;
  g.n_pages = pool_.n_pages();
  g.page_size = pool_.page_size();
  g.n_kv_heads = config_.n_kv_heads;
  g.head_dim = config_.head_dim;
  g.dtype = pool_.dtype();
  return g;
}

model::ForwardShape ModelRunner::shape_of(const StepBatch& batch) const {
  model::ForwardShape s =
      geometry_.forward_shape(batch.num_seqs(), batch.num_tokens(), batch.greedy_only);
  // A batch that returns every row (decode, speculative verify) keeps every row (no gather).
  s.logit_rows = batch.returns_every_row() ? -1 : batch.logit_rows();
  s.hidden_rows = batch.hidden_rows();
  // A step of hidden rows only (embeddings) runs no LM head.
  s.logits = s.hidden_rows == 0 || s.logit_rows != 0;
  return s;
}

graph::Graph ModelRunner::trace(const model::ForwardShape& shape) const {
  return model::build_forward(config_, weights_.lookup(), shape, batch_name(shape));
}

void ModelRunner::validate(const StepBatch& b) const {
  const int64_t T = b.num_tokens();
  KILN_CHECK(T > 0 && b.num_seqs() > 0, "empty step batch");
  KILN_CHECK(static_cast<int64_t>(b.positions.size()) == T &&
                 static_cast<int64_t>(b.token_seq.size()) == T &&
                 static_cast<int64_t>(b.slots.size()) == T,
             "step batch vectors disagree in length");
  const int64_t slots = pool_.n_pages() * pool_.page_size();
  for (int64_t t = 0; t < T; ++t) {
    KILN_CHECK(b.token_ids[t] >= 0 && b.token_ids[t] < config_.vocab,
               "token id {} out of range [0, {})", b.token_ids[t], config_.vocab);
    KILN_CHECK(b.token_seq[t] >= 0 && b.token_seq[t] < b.num_seqs(), "row {} names no sequence", t);
    KILN_CHECK(b.positions[t] >= 0 && b.positions[t] < geometry_.context_length,
               "position {} outside the context {}", b.positions[t], geometry_.context_length);
    KILN_CHECK(b.slots[t] < slots, "KV slot {} outside the pool", b.slots[t]);
  }
  for (const auto& seq : b.seqs) {
    KILN_CHECK(static_cast<int64_t>(seq.pages.size()) <= geometry_.max_pages_per_seq,
               "block table longer than the context");
    KILN_CHECK(seq.seq_len <= static_cast<int64_t>(seq.pages.size()) * pool_.page_size(),
               "sequence of {} tokens has only {} pages", seq.seq_len, seq.pages.size());
  }
}

void ModelRunner::bind(const StepBatch& b, const model::ForwardShape& shape,
                       BoundInputs& bound) const {
  namespace in = model::input_names;
  const int64_t T = b.num_tokens();
  const int64_t S = b.num_seqs();
  bound.block_table.assign(static_cast<size_t>(S * geometry_.max_pages_per_seq), 0);
  for (int64_t s = 0; s < S; ++s) {
    std::copy(b.seqs[s].pages.begin(), b.seqs[s].pages.end(),
              bound.block_table.begin() + s * geometry_.max_pages_per_seq);
  }
  bound.bindings.clear();
  bound.bindings.push_back({in::kTokenIds, borrow_i32(b.token_ids, {T})});
  bound.bindings.push_back({in::kPositions, borrow_i32(b.positions, {T})});
  bound.bindings.push_back({in::kTokenSeq, borrow_i32(b.token_seq, {T})});
  bound.bindings.push_back({in::kSlots, borrow_i32(b.slots, {T})});
  bound.bindings.push_back(
      {in::kBlockTable, borrow_i32(bound.block_table, {S, geometry_.max_pages_per_seq})});
  bound.seq_lens.resize(S);
  for (int64_t s = 0; s < S; ++s) bound.seq_lens[s] = b.seqs[s].seq_len;
  bound.bindings.push_back({in::kSeqLens, borrow_i32(bound.seq_lens, {S})});
  bound.logit_rows = b.logit_row_indices();
  if (shape.logit_rows >= 0 && shape.logits) {
    bound.bindings.push_back({in::kLogitRows, borrow_i32(bound.logit_rows, {shape.logit_rows})});
  }
  bound.hidden_rows = b.hidden_row_indices();
  if (shape.hidden_rows > 0) {
    bound.bindings.push_back({in::kHiddenRows, borrow_i32(bound.hidden_rows, {shape.hidden_rows})});
  }
  const graph::ValueType kv = model::kv_state_type(config_, shape);
  bound.bindings.push_back({in::kKvPool, Tensor::borrow(kv.dtype, kv.shape, pool_.data())});
}

void ModelRunner::forward(const StepBatch& batch, StepOutput& out) {
  validate(batch);
  // Captured plans end in the LM head; hidden-state steps are traced for what they return.
  out.hidden.clear();
  out.hidden_dim = 0;
  if (batch.hidden_rows() == 0 && replayer_ != nullptr && replayer_->try_run(batch, out)) return;
  run_eager(batch, out);
}

void ModelRunner::forward_in_mode(const StepBatch& batch, StepOutput& out, StepMode mode) {
  switch (mode) {
    case StepMode::Auto:
      forward(batch, out);
      return;
    case StepMode::Eager:
      forward_eager(batch, out);
      return;
    case StepMode::Graph:
      validate(batch);
      KILN_CHECK(replayer_ != nullptr && replayer_->try_run(batch, out),
                 "graph mode cannot run this step ({} rows, {} sequences): no captured plan "
                 "fits it",
                 batch.num_tokens(), batch.num_seqs());
      return;
  }
  fail("unknown step mode {}", static_cast<int>(mode));
}

void ModelRunner::forward_eager(const StepBatch& batch, StepOutput& out) {
  validate(batch);
  run_eager(batch, out);
}

void ModelRunner::run_eager(const StepBatch& batch, StepOutput& out) {
  model::ForwardShape shape = shape_of(batch);
  graph::Graph g = trace(shape);
  BoundInputs bound;
  bind(batch, shape, bound);

  std::vector<Tensor> results = interpreter_.run(g, bound.bindings);
  out.vocab = config_.vocab;
  out.used_graph = false;
  out.hidden.clear();
  out.hidden_dim = 0;
  if (shape.hidden_rows > 0) {
    const Tensor& h = results.back();
    out.hidden.assign(h.data_as<float>(), h.data_as<float>() + h.numel());
    out.hidden_dim = config_.n_embd;
  }
  const Tensor& r = results.at(0);
  if (!shape.logits) {
    out.logits.clear();
    out.greedy_ids.clear();
  } else if (shape.greedy) {
    out.greedy_ids.assign(r.data_as<int32_t>(), r.data_as<int32_t>() + r.numel());
    out.logits.clear();
  } else {
    out.logits.assign(r.data_as<float>(), r.data_as<float>() + r.numel());
    out.greedy_ids.clear();
  }
}

}  // namespace kiln::engine
