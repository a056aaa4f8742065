// Turns one row of logits into the next token for one request: penalties, temperature,
// top-k / top-p / min-p truncation, then a draw from the request's own RNG (or argmax when
// greedy). Also computes logprobs when asked.
//
// Order (as SGLang/vLLM): repetition penalty (prompt + output tokens; logit > 0 ? l / p : l * p),
// frequency and presence penalties (output tokens), logit bias, banned tokens (-inf),
// temperature, then the
// truncations, which all keep a prefix of the tokens sorted by probability, so the kept set is
// the shortest of: the top k; the fewest tokens whose probability mass (of the full
// distribution) reaches top_p; the tokens with p >= min_p * p_max.
//
// Logprobs are the log-softmax of the logits after penalties and temperature (temperature 1
// when greedy) and before truncation, so alternatives outside the kept set still show.
//
// Cost on a 262144-wide row: O(V) passes (max, optional softmax sum), plus selection over the
// candidates (nth_element / heap), never a full sort unless top_p needs the whole vocabulary.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/engine/request.h"

namespace kiln::engine {

// The log-softmax of raw `logits` at `token`, with the `top` most likely tokens (ties: lower
// id first): how a prompt token is scored (no penalties, temperature 1).
TokenLogprob score_token(std::span<const float> logits, int32_t token, int top);

class Sampler {
 public:
  // n_logprobs: -1 none, 0 the chosen token's logprob, k > 0 also the top k alternatives.
  Sampler(const SamplingParams& params, uint64_t seed, int n_logprobs = -1);

  // Tokens the repetition penalty looks at besides the output (call once with the prompt).
  void add_prompt(std::span<const int32_t> prompt);
  // Records a generated token (for the penalties). The engine calls it for every accepted
  // token, whether it came from sample() or from the executor's greedy fast path.
  void add_output(int32_t token);

  // True when the executor's on-device argmax picks the same token sample() would: greedy,
  // no logprobs, and no penalty, bias or JSON constraint that would change the logits.
  bool greedy_fast_path_ok() const;

  // Samples from `logits` (modified in place: penalties and temperature are applied to it).
  // `banned` tokens get probability 0 (min_new_tokens suppresses EOS/stop ids this way).
  // Throws kiln::Error on NaN logits or when every token is banned.
  int32_t sample(std::span<float> logits, std::span<const int32_t> banned = {},
                 TokenLogprob* logprob = nullptr);

  // sample() for a verify row whose proposed token is `proposed` (n-gram lookup or a greedy
  // draft model: proposers that put all their probability on one token): keeps `proposed`
  // with the probability sample() would give it (*accepted = true), else draws from that
  // distribution without it. The returned token has sample()'s distribution either way (the
  // speculative sampling rule); greedy parameters accept exactly when `proposed` is the argmax.
  int32_t sample_or_accept(std::span<float> logits, int32_t proposed, bool* accepted,
                           std::span<const int32_t> banned = {}, TokenLogprob* logprob = nullptr);

  const SamplingParams& params() const { return params_; }

 private:
  bool penalties_active() const;
  void apply_penalties(std::span<float> logits) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  int n_logprobs_;
  // Distinct tokens of prompt + output (repetition penalty) and output counts (frequency /
  // presence). Sparse: only tokens that occurred are touched, never the whole vocabulary.
  std::unordered_set<int32_t> seen_;
  std::unordered_map<int32_t, int32_t> output_counts_;
};

// Index of the largest value, lowest index among ties; throws kiln::Error on NaN.
int32_t argmax_lowest(std::span<const float> values);

}  // namespace kiln::engine
