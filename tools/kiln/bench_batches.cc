#include "bench_batches.h"

#include <algorithm>
#include <random>

#include "kiln/base/error.h"

namespace kiln::cli {

BenchSequences::BenchSequences(engine::KvPool& pool, int bs, int input_len, int output_len,
                               int64_t vocab, uint64_t seed)
    : pool_(pool) {
  KILN_CHECK(bs >= 1 && input_len >= 1 && output_len >= 1,
             "batch {} with input {} and output {} tokens", bs, input_len, output_len);
  std::mt19937_64 rng(seed);
  const int64_t lo = std::min<int64_t>(vocab / 2, 256);  // tokenizers keep control tokens low
  std::uniform_int_distribution<int64_t> dist(lo, vocab - 1);
  const int64_t pages_each = (input_len + output_len + pool.page_size() - 1) / pool.page_size();
  prompts_.resize(bs);
  pages_.resize(bs);
  for (int s = 0; s < bs; ++s) {
    prompts_[s].resize(input_len);
    for (auto& t : prompts_[s]) t = static_cast<int32_t>(dist(rng));
    if (!pool.alloc(pages_each, pages_[s])) {
      for (int k = 0; k < s; ++k) pool.free(pages_[k]);
      pages_.clear();
      fail("the KV pool has {} free pages; batch {} needs {}", pool.free_pages() + s * pages_each,
           bs, bs * pages_each);
    }
  }
}

BenchSequences::~BenchSequences() {
  for (const auto& p : pages_) pool_.free(p);
}

int32_t BenchSequences::slot(int seq, int pos) const {
  return pages_[seq][pos / pool_.page_size()] * pool_.page_size() + pos % pool_.page_size();
}

std::vector<BenchSequences::Chunk> BenchSequences::prefill(int64_t chunk_tokens) const {
  KILN_CHECK(chunk_tokens >= 1, "prefill chunk of {} tokens", chunk_tokens);
  std::vector<Chunk> chunks;
  Chunk* c = nullptr;
  for (int s = 0; s < size(); ++s) {
    const int n = static_cast<int>(prompts_[s].size());
    for (int p = 0; p < n; ++p) {
      if (c == nullptr || c->batch.num_tokens() >= chunk_tokens) {
        chunks.emplace_back();
        c = &chunks.back();
        c->batch.greedy_only = true;
      }
      engine::StepBatch& b = c->batch;
      if (c->seqs.empty() || c->seqs.back() != s) {
        c->seqs.push_back(s);
        c->finishes.push_back(false);
        b.seqs.push_back({pages_[s], 0, true});
      }
      b.token_ids.push_back(prompts_[s][p]);
      b.positions.push_back(p);
      b.token_seq.push_back(static_cast<int32_t>(b.seqs.size() - 1));
      b.slots.push_back(slot(s, p));
      b.seqs.back().seq_len = p + 1;
      c->finishes.back() = p + 1 == n;
    }
  }
  return chunks;
}

engine::StepBatch BenchSequences::decode(int pos, const std::vector<int32_t>& tokens,
                                         bool greedy_only) const {
  KILN_CHECK(static_cast<int>(tokens.size()) == size(), "{} tokens for {} sequences", tokens.size(),
             size());
  engine::StepBatch b;
  b.greedy_only = greedy_only;
  for (int s = 0; s < size(); ++s) {
    b.token_ids.push_back(tokens[s]);
    b.positions.push_back(pos);
    b.token_seq.push_back(s);
    b.slots.push_back(slot(s, pos));
    b.seqs.push_back({pages_[s], pos + 1, true});
  }
  return b;
}

}  // namespace kiln::cli
