// Test doubles for the engine: a fake vocabulary (FakeTokenizer) and a fake model
// (FakeModel) whose logits are a deterministic function of the whole token history, read back
// through the paged KV cache it simulates, so that any scheduling or paging mistake changes
// the output. FakeModel also checks that every StepBatch is well formed.
#pragma once
#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/request.h"
#include "kiln/engine/sampler.h"
#include "kiln/engine/step_batch.h"
#include "kiln/engine/stop_checker.h"
#include "kiln/engine/token_text.h"

namespace kiln::engine::testing {

// ids 0 <pad>, 1 <eos>, 2 <eot> (special; 1 and 2 end generation); 3..28 'a'..'z';
// 29 ' '; 30 '\xC3' and 31 '\xA9' (the two bytes of "é"); 32 "é"; every other id t: "t<t>".
class FakeTokenizer : public TokenText {
 public:
  explicit FakeTokenizer(int64_t vocab = 512) : vocab_(vocab) {}
  static constexpr int32_t kEos = 1, kEot = 2, kSpace = 29, kByteC3 = 30, kByteA9 = 31,
                           kEAcute = 32;
  static int32_t letter(char c) { return 3 + (c - 'a'); }
  std::string piece(int32_t t) const {
    if (t == 0) return "<pad>";
    if (t == kEos) return "<eos>";
    if (t == kEot) return "<eot>";
    if (t >= 3 && t <= 28) return std::string(1, static_cast<char>('a' + (t - 3)));
    if (t == kSpace) return " ";
    if (t == kByteC3) return "\xC3";
    if (t == kByteA9) return "\xA9";
    if (t == kEAcute) return "\xC3\xA9";
    return fmt::format("t{}", t);
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string s;
    for (int32_t t : ids) {
      if (skip_special && t <= kEot) continue;
      s += piece(t);
    }
    return s;
  }
  bool is_end_of_generation(int32_t id) const override { return id == kEos || id == kEot; }
  int64_t vocab_size() const override { return vocab_; }
  std::vector<int32_t> encode_letters(const std::string& s) const {
    std::vector<int32_t> ids;
    for (char c : s) ids.push_back(c == ' ' ? kSpace : letter(c));
    return ids;
  }

 private:
  int64_t vocab_;
};

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
inline uint64_t history_hash(uint64_t prev, int32_t token, int32_t pos) {
  return mix64(prev ^ mix64(static_cast<uint64_t>(token) * 0x9E3779B97F4A7C15ULL +
                            static_cast<uint64_t>(pos)));
}
constexpr uint64_t kHistorySeed = 0x1234567887654321ULL;

// Logits of the next token after a history with hash h: uniform in [-4, 4), and the special
// tokens (pad, eos, eot) pushed down by `eos_bias` so that generations are not cut too short.
inline void fake_logits(uint64_t h, int64_t vocab, float eos_bias, float* out) {
  for (int64_t v = 0; v < vocab; ++v) {
    const uint64_t r = mix64(h ^ (static_cast<uint64_t>(v) * 0xD6E8FEB86659FD93ULL));
    out[v] =
        static_cast<float>(static_cast<double>(r >> 40) / static_cast<double>(1 << 24)) * 8.0f -
        4.0f;
    if (v <= FakeTokenizer::kEot) out[v] -= eos_bias;
  }
}

class FakeModel : public ModelExecutor {
 public:
  FakeModel(const KvPool& pool, int64_t vocab = 512, int64_t context = 4096, float eos_bias = 2.0f)
      : page_size_(pool.page_size()),
        n_pages_(pool.n_pages()),
        vocab_(vocab),
        context_(context),
        eos_bias_(eos_bias),
        slots_(static_cast<size_t>(pool.n_pages() * pool.page_size())) {}

  int64_t vocab_size() const override { return vocab_; }
  int64_t context_length() const override { return context_; }

  void forward(const StepBatch& b, StepOutput& out) override {
    if (before_forward) before_forward(b);
    try {
      check(b);
    } catch (const Error& e) {
      std::lock_guard lk(mu_);
      errors.push_back(e.what());
      throw;
    }
    for (int32_t t : b.token_ids) {
      if (t == poison_token) throw Error("poisoned token");
    }
    std::vector<uint64_t> row_hash(static_cast<size_t>(b.num_tokens()));
    for (int64_t r = 0; r < b.num_tokens(); ++r) {
      const int32_t pos = b.positions[r];
      const StepSequence& s = b.seqs[static_cast<size_t>(b.token_seq[r])];
      uint64_t prev = kHistorySeed;
      if (pos > 0) {
        const Record& rec = slots_[static_cast<size_t>(slot_of(s, pos - 1))];
        // Reading what an earlier step (or row) wrote: a freed-and-reused page shows up here.
        if (!rec.valid || rec.pos != pos - 1) fail_batch("stale KV read at position {}", pos - 1);
        prev = rec.hash;
      }
      const uint64_t h = history_hash(prev, b.token_ids[r], pos);
      slots_[static_cast<size_t>(b.slots[r])] = Record{true, pos, h};
      // Markov: the next token's logits depend on this row's token alone, so greedy output
      // falls into a cycle (what speculative decoding's proposals can copy).
      row_hash[static_cast<size_t>(r)] = markov ? history_hash(kHistorySeed, b.token_ids[r], 0) : h;
    }
    // Every position below seq_len must hold that position's K/V.
    for (const StepSequence& s : b.seqs) {
      for (int32_t p = 0; p < s.seq_len; ++p) {
        const Record& rec = slots_[static_cast<size_t>(slot_of(s, p))];
        if (!rec.valid || rec.pos != p) fail_batch("position {} missing from the KV cache", p);
      }
    }
    out.vocab = vocab_;
    out.used_graph = b.is_decode();
    const std::vector<int32_t> logit_rows = b.logit_row_indices();
    const auto n = static_cast<int64_t>(logit_rows.size());
    std::vector<float> row(static_cast<size_t>(vocab_));
    if (b.greedy_only) {
      out.greedy_ids.clear();
    } else {
      out.logits.assign(static_cast<size_t>(n * vocab_), 0.0f);
    }
    int64_t k = 0;
    for (int32_t r : logit_rows) {
      fake_logits(row_hash[static_cast<size_t>(r)], vocab_, eos_bias_, row.data());
      if (b.greedy_only) {
        out.greedy_ids.push_back(argmax_lowest(row));
      } else {
        std::copy(row.begin(), row.end(), out.logits.begin() + k * vocab_);
      }
      ++k;
    }
    steps++;
    if (b.is_decode()) decode_steps++;
    if (b.greedy_only) greedy_steps++;
    rows += b.num_tokens();
    max_batch_seqs = std::max<int64_t>(max_batch_seqs, b.num_seqs());
    max_batch_rows = std::max<int64_t>(max_batch_rows, b.num_tokens());
  }

  std::vector<std::string> errors_copy() {
    std::lock_guard lk(mu_);
    return errors;
  }

  std::function<void(const StepBatch&)> before_forward;  // e.g. block, or count
  int32_t poison_token = -1;                             // forward() throws when it sees it
  bool markov = false;                                   // logits from the row's token only
  std::vector<std::string> errors;                       // well-formedness violations
  std::atomic<int64_t> steps{0}, decode_steps{0}, greedy_steps{0}, rows{0};
  std::atomic<int64_t> max_batch_seqs{0}, max_batch_rows{0};

 private:
  struct Record {
    bool valid = false;
    int32_t pos = -1;
    uint64_t hash = 0;
  };

  template <typename... Args>
  [[noreturn]] void fail_batch(fmt::format_string<Args...> f, Args&&... args) {
    const std::string msg = fmt::format(f, std::forward<Args>(args)...);
    {
      std::lock_guard lk(mu_);
      errors.push_back(msg);
    }
    throw Error(msg);
  }

  int64_t slot_of(const StepSequence& s, int32_t pos) const {
    return static_cast<int64_t>(s.pages[static_cast<size_t>(pos / page_size_)]) * page_size_ +
           pos % page_size_;
  }

  void check(const StepBatch& b) const {
    const int64_t T = b.num_tokens(), S = b.num_seqs();
    KILN_CHECK(T > 0 && S > 0, "empty batch");
    KILN_CHECK(static_cast<int64_t>(b.positions.size()) == T &&
                   static_cast<int64_t>(b.token_seq.size()) == T &&
                   static_cast<int64_t>(b.slots.size()) == T,
               "row arrays differ in length");
    std::vector<int64_t> rows_of(static_cast<size_t>(S), 0);
    for (int64_t r = 0; r < T; ++r) {
      KILN_CHECK(b.token_ids[r] >= 0 && b.token_ids[r] < vocab_, "token id out of range");
      const int32_t s = b.token_seq[r];
      KILN_CHECK(s >= 0 && s < S, "token_seq out of range");
      KILN_CHECK(r == 0 || s >= b.token_seq[r - 1], "rows of a sequence are not contiguous");
      if (r > 0 && s == b.token_seq[r - 1])
        KILN_CHECK(b.positions[r] == b.positions[r - 1] + 1, "positions not contiguous");
      ++rows_of[static_cast<size_t>(s)];
    }
    std::vector<std::set<int32_t>> written(static_cast<size_t>(S));
    for (int64_t i = 0; i < S; ++i) {
      const StepSequence& seq = b.seqs[static_cast<size_t>(i)];
      KILN_CHECK(rows_of[static_cast<size_t>(i)] > 0, "sequence {} has no rows", i);
      KILN_CHECK(seq.seq_len > 0 && seq.seq_len <= context_, "bad seq_len {}", seq.seq_len);
      KILN_CHECK(static_cast<int64_t>(seq.pages.size()) * page_size_ >= seq.seq_len,
                 "block table too short");
      std::set<int32_t> distinct(seq.pages.begin(), seq.pages.end());
      KILN_CHECK(distinct.size() == seq.pages.size(), "a page appears twice in a block table");
      for (int32_t p : seq.pages) KILN_CHECK(p >= 0 && p < n_pages_, "page {} out of range", p);
    }
    for (int64_t r = 0; r < T; ++r) {
      const int32_t s = b.token_seq[r];
      const StepSequence& seq = b.seqs[static_cast<size_t>(s)];
      const bool last = r + 1 == T || b.token_seq[r + 1] != s;
      if (last) KILN_CHECK(b.positions[r] == seq.seq_len - 1, "last row is not at seq_len - 1");
      KILN_CHECK(b.positions[r] >= 0 && b.positions[r] < seq.seq_len, "position out of range");
      KILN_CHECK(b.slots[r] == slot_of(seq, b.positions[r]), "slot is not the position's slot");
      written[static_cast<size_t>(s)].insert(b.slots[r] / page_size_);
    }
    // A page written by one sequence must not be visible to another in the same batch; pages
    // that several sequences share (prefix cache) are therefore read-only here.
    for (int64_t i = 0; i < S; ++i) {
      for (int64_t j = 0; j < S; ++j) {
        if (i == j) continue;
        for (int32_t p : b.seqs[static_cast<size_t>(j)].pages)
          KILN_CHECK(!written[static_cast<size_t>(i)].count(p),
                     "page {} written by sequence {} is in sequence {}'s block table", p, i, j);
      }
    }
    if (b.greedy_only) {
      bool any = false;
      for (const auto& s : b.seqs) any |= s.want_logits;
      KILN_CHECK(any, "greedy_only without any sequence wanting logits");
    }
  }

  int page_size_;
  int64_t n_pages_;
  int64_t vocab_;
  int64_t context_;
  float eos_bias_;
  std::vector<Record> slots_;
  std::mutex mu_;
};

// What a request produces when run alone, computed without the scheduler: the same hash
// chain, the same Sampler and StopChecker, one token at a time.
struct Generation {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::None;
  std::string matched_stop;
};

inline Generation reference_generate(const GenerateRequest& req, uint64_t seed,
                                     const FakeTokenizer& tok, int64_t vocab,
                                     float eos_bias = 2.0f) {
  std::vector<int32_t> eog;
  for (int32_t t = 0; t < vocab; ++t)
    if (tok.is_end_of_generation(t)) eog.push_back(t);
  Sampler sampler(req.sampling, req.sampling.seed.value_or(seed), req.logprobs);
  sampler.add_prompt(req.prompt_ids);
  StopChecker stop(req.stop, tok, req.skip_special_tokens, eog);
  Generation g;
  if (req.stop.max_new_tokens == 0) {
    g.reason = FinishReason::Length;
    return g;
  }
  uint64_t h = kHistorySeed;
  int32_t pos = 0;
  for (int32_t t : req.prompt_ids) h = history_hash(h, t, pos++);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (;;) {
    fake_logits(h, vocab, eos_bias, logits.data());
    TokenLogprob lp;
    const int32_t t = sampler.sample(logits, stop.banned_ids(), &lp);
    sampler.add_output(t);
    g.tokens.push_back(t);
    StopUpdate u = stop.on_token(t);
    g.text += u.text_delta;
    if (u.finished) {
      g.reason = u.reason;
      g.matched_stop = u.matched_stop;
      return g;
    }
    h = history_hash(h, t, pos++);
  }
}

}  // namespace kiln::engine::testing
