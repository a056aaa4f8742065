#include "kiln/engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kiln/base/error.h"

namespace kiln::engine {

void validate(const SamplingParams& p) {
  KILN_CHECK(std::isfinite(p.temperature) && p.temperature >= 0.0,
             "temperature must be a finite number >= 0, got {}", p.temperature);
  KILN_CHECK(p.top_k >= -1, "top_k must be -1 (off), 0 (off) or positive, got {}", p.top_k);
  KILN_CHECK(std::isfinite(p.top_p) && p.top_p > 0.0 && p.top_p <= 1.0,
             "top_p must be in (0, 1], got {}", p.top_p);
  KILN_CHECK(std::isfinite(p.min_p) && p.min_p >= 0.0 && p.min_p <= 1.0,
             "min_p must be in [0, 1], got {}", p.min_p);
  KILN_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0,
             "repetition_penalty must be a finite number > 0, got {}", p.repetition_penalty);
  KILN_CHECK(std::isfinite(p.frequency_penalty) && p.frequency_penalty >= -2.0 &&
                 p.frequency_penalty <= 2.0,
             "frequency_penalty must be in [-2, 2], got {}", p.frequency_penalty);
  KILN_CHECK(
      std::isfinite(p.presence_penalty) && p.presence_penalty >= -2.0 && p.presence_penalty <= 2.0,
      "presence_penalty must be in [-2, 2], got {}", p.presence_penalty);
  for (const auto& [token, bias] : p.logit_bias) {
    KILN_CHECK(token >= 0, "logit_bias token id must be >= 0, got {}", token);
    KILN_CHECK(std::isfinite(bias) && bias >= -100.0f && bias <= 100.0f,
               "logit_bias for token {} must be in [-100, 100], got {}", token, bias);
  }
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Uniform double in [0, 1) from the top 53 bits: the same on every standard library (unlike
// std::uniform_real_distribution, whose algorithm is unspecified).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// exp(x) for x <= 0 (and -inf), branch-free so that loops over a vocabulary vectorize (std::exp
// does not): x = n + f with n an integer and |f| <= 1/2 in base 2, 2^f by its degree-6 Taylor
// polynomial (relative error ~1e-7, float precision), 2^n through the exponent bits.
inline float exp_nonpositive(float x) {
  // Clamp at -87 (exp is ~0 there; keeps 2^n a normal float) on the bits: for x <= 0 and
  // -inf a larger magnitude is a larger unsigned pattern. An integer min vectorizes, a float
  // compare-and-select does not (GCC keeps it as a branch under trapping math).
  constexpr uint32_t kMinBits = std::bit_cast<uint32_t>(-87.0f);
  const uint32_t xb = std::bit_cast<uint32_t>(x);
  x = std::bit_cast<float>(xb < kMinBits ? xb : kMinBits);
  const float t = x * 1.44269504088896341f;
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = t + kShifter;
  const float n = shifted - kShifter;
  const float f = (t - n) * 0.693147180559945309f;  // back to base e, |f| <= ln2 / 2
  float p = 1.0f / 720.0f;
  p = p * f + 1.0f / 120.0f;
  p = p * f + 1.0f / 24.0f;
  p = p * f + 1.0f / 6.0f;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const auto bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// w[i] = exp(v[i] - max) for the whole row; returns their sum.
double softmax_weights(std::span<const float> v, float max_v, std::vector<float>& w) {
  w.resize(v.size());
  float* out = w.data();
  const float* in = v.data();
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) out[i] = exp_nonpositive(in[i] - max_v);
  // Summed in blocks of float, blocks in double: accurate, and still vectorized.
  double z = 0.0;
  for (size_t b = 0; b < n; b += 1024) {
    float block = 0.0f;
    const size_t e = std::min(n, b + 1024);
    for (size_t i = b; i < e; ++i) block += out[i];
    z += block;
  }
  return z;
}

// "a ranks before b": higher value first, lower id among ties, so every selection below is
// deterministic.
struct RankDesc {
  const float* v;
  bool operator()(int32_t a, int32_t b) const {
    const float va = v[a], vb = v[b];
    return va > vb || (va == vb && a < b);
  }
};

// Scratch reused across calls (one scheduler thread samples all requests): rows as wide as
// the vocabulary are too big to allocate per token.
struct Scratch {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The n best ids of v (by RankDesc), best first: a bounded heap, O(V log n).
void top_n(std::span<const float> v, int64_t n, std::vector<int32_t>& out) {
  out.clear();
  n = std::min<int64_t>(n, static_cast<int64_t>(v.size()));
  if (n <= 0) return;
  RankDesc rank{v.data()};
  out.reserve(static_cast<size_t>(n));  // a heap whose top is the worst kept id
  for (int32_t i = 0; i < static_cast<int32_t>(v.size()); ++i) {
    if (static_cast<int64_t>(out.size()) < n) {
      out.push_back(i);
      std::push_heap(out.begin(), out.end(), rank);
    } else if (rank(i, out.front())) {
      std::pop_heap(out.begin(), out.end(), rank);
      out.back() = i;
      std::push_heap(out.begin(), out.end(), rank);
    }
  }
  std::sort(out.begin(), out.end(), rank);
}

// Inverse-CDF draw over weights w of ids[0..n) (or of 0..n when ids is null). `fallback`
// (the most likely token) covers rounding leaving the scan just short of u.
int32_t draw(std::mt19937_64& rng, const float* w, double total, int64_t n, const int32_t* ids,
             int32_t fallback) {
  const double u = uniform01(rng) * total;
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ids ? ids[i] : static_cast<int32_t>(i);
    if (w[id] == 0.0f) continue;  // banned (-inf) or underflowed: never chosen
    acc += w[id];
    if (acc > u) return id;
  }
  return fallback;
}

// Top-p over the whole vocabulary without sorting it: a histogram of the probability mass by
// distance from the max logit (kBinsPerUnit bins per logit unit) finds the bin where the mass
// reaches the target; only tokens at or above that bin are collected and sorted. Bins are
// monotone in the logit, so the sorted collection is an exact prefix of the full order.
void nucleus_candidates(std::span<const float> v, float max_v, const std::vector<float>& w,
                        double target, std::vector<int32_t>& out) {
  constexpr int kBinsPerUnit = 16, kBins = 40 * kBinsPerUnit;  // beyond 40 units: mass ~e^-40
  double mass[kBins] = {};
  auto bin_of = [&](float l) {
    const float d = (max_v - l) * kBinsPerUnit;  // >= 0; +inf for banned tokens
    return d < static_cast<float>(kBins - 1) ? static_cast<int>(d) : kBins - 1;
  };
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) mass[bin_of(v[i])] += w[i];
  int last = kBins - 1;
  double acc = 0.0;
  for (int b = 0; b < kBins; ++b) {
    acc += mass[b];
    if (acc >= target) {
      last = b;
      break;
    }
  }
  out.clear();
  for (size_t i = 0; i < n; ++i) {
    if (bin_of(v[i]) <= last) out.push_back(static_cast<int32_t>(i));
  }
  std::sort(out.begin(), out.end(), RankDesc{v.data()});
}

}  // namespace

int32_t argmax_lowest(std::span<const float> values) {
  KILN_CHECK(!values.empty(), "argmax of an empty row");
  int32_t best = 0;
  float best_v = values[0];
  bool nan = std::isnan(best_v);
  for (size_t i = 1; i < values.size(); ++i) {
    const float x = values[i];
    nan |= std::isnan(x);
    if (x > best_v) {  // strict: the first (lowest) index wins ties
      best_v = x;
      best = static_cast<int32_t>(i);
    }
  }
  KILN_CHECK(!nan, "the model produced NaN logits");
  return best;
}

Sampler::Sampler(const SamplingParams& params, uint64_t seed, int n_logprobs)
    : params_(params), rng_(seed), n_logprobs_(n_logprobs) {
  validate(params);
  KILN_CHECK(n_logprobs >= -1, "logprobs must be -1 (none) or >= 0, got {}", n_logprobs);
}

void Sampler::add_prompt(std::span<const int32_t> prompt) {
  if (params_.repetition_penalty == 1.0) return;
  seen_.insert(prompt.begin(), prompt.end());
}

void Sampler::add_output(int32_t token) {
  if (params_.repetition_penalty != 1.0) seen_.insert(token);
  if (params_.frequency_penalty != 0.0 || params_.presence_penalty != 0.0) ++output_counts_[token];
}

bool Sampler::penalties_active() const {
  return (params_.repetition_penalty != 1.0 && !seen_.empty()) ||
         ((params_.frequency_penalty != 0.0 || params_.presence_penalty != 0.0) &&
          !output_counts_.empty());
}

bool Sampler::greedy_fast_path_ok() const {
  return params_.is_greedy() && n_logprobs_ < 0 && !penalties_active() &&
         params_.logit_bias.empty() && !params_.json_schema && !params_.grammar;
}

void Sampler::apply_penalties(std::span<float> logits) const {
  const auto vocab = static_cast<int64_t>(logits.size());
  const auto rep = static_cast<float>(params_.repetition_penalty);
  if (rep != 1.0f) {
    for (int32_t t : seen_) {
      if (t < 0 || t >= vocab) continue;  // ids are validated upstream; stay safe anyway
      float& l = logits[static_cast<size_t>(t)];
      l = l > 0.0f ? l / rep : l * rep;
    }
  }
  const auto freq = static_cast<float>(params_.frequency_penalty);
  const auto pres = static_cast<float>(params_.presence_penalty);
  if (freq != 0.0f || pres != 0.0f) {
    for (const auto& [t, count] : output_counts_) {
      if (t < 0 || t >= vocab) continue;
      logits[static_cast<size_t>(t)] -= static_cast<float>(count) * freq + pres;
    }
  }
  for (const auto& [t, bias] : params_.logit_bias) {
    if (t >= 0 && t < vocab) logits[static_cast<size_t>(t)] += bias;  // ids checked upstream
  }
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> banned,
                        TokenLogprob* logprob) {
  return sample_or_accept(logits, -1, nullptr, banned, logprob);
}

int32_t Sampler::sample_or_accept(std::span<float> logits, int32_t proposed, bool* accepted,
                                  std::span<const int32_t> banned, TokenLogprob* logprob) {
  const auto vocab = static_cast<int64_t>(logits.size());
  KILN_CHECK(vocab > 0, "sampling from an empty logits row");
  apply_penalties(logits);
  for (int32_t t : banned) {
    if (t >= 0 && t < vocab) logits[static_cast<size_t>(t)] = kNegInf;
  }

  const bool greedy = params_.is_greedy();
  // Temperature: scaling by 1/T keeps the order, so greedy ignores it; logprobs use T = 1 then.
  const float inv_t = greedy ? 1.0f : static_cast<float>(1.0 / params_.temperature);
  if (!greedy && inv_t != 1.0f) {
    for (float& l : logits) l *= inv_t;
  }
  const int32_t best = argmax_lowest(logits);  // also rejects NaN
  const float max_l = logits[static_cast<size_t>(best)];
  KILN_CHECK(max_l != kNegInf, "every token is banned: nothing to sample");
  if (std::isinf(max_l)) fail("the model produced infinite logits");

  const bool use_top_k = !greedy && params_.top_k > 0 && params_.top_k < vocab;
  const bool use_min_p = !greedy && params_.min_p > 0.0;
  const bool use_top_p = !greedy && params_.top_p < 1.0;
  const bool truncated = use_top_k || use_min_p || use_top_p;
  // Weights exp(l - max) of the whole row and their sum z: needed for logprobs, for top-p
  // (its mass is a fraction of the full distribution) and for an untruncated draw.
  Scratch& sc = scratch();
  const bool need_z = n_logprobs_ >= 0 || use_top_p || (!greedy && !truncated);
  double z = 0.0;
  if (need_z) z = softmax_weights(logits, max_l, sc.weights);

  // A draw from weights w[ids[i]] (ids null: w[0..n)), or with a proposal the speculative
  // sampling rule for a deterministic proposer (its distribution q is all on `proposed`): keep
  // `proposed` with its probability p, else draw from p without it (the residual
  // max(0, p - q), normalized). The token has the distribution p either way.
  auto pick = [&](float* w, double total, int64_t n, const int32_t* ids) -> int32_t {
    if (proposed < 0) return draw(rng_, w, total, n, ids, best);
    const bool candidate =
        ids == nullptr ? proposed < n : std::find(ids, ids + n, proposed) != ids + n;
    const double p = candidate ? static_cast<double>(w[proposed]) : 0.0;
    if (uniform01(rng_) * total < p) {
      *accepted = true;
      return proposed;
    }
    *accepted = false;
    if (!candidate) return draw(rng_, w, total, n, ids, best);
    const float saved = w[proposed];
    w[proposed] = 0.0f;
    int32_t fallback = best;  // for a sum that rounding leaves short: the best other token
    for (int64_t i = 0; i < n && fallback == best && best == proposed; ++i) {
      const int32_t id = ids ? ids[i] : static_cast<int32_t>(i);
      if (w[id] > 0.0f) fallback = id;
    }
    const int32_t t = draw(rng_, w, total - p, n, ids, fallback);
    w[proposed] = saved;
    return t;
  };
  int32_t chosen = best;
  if (greedy && proposed >= 0) *accepted = best == proposed;
  if (!greedy && !truncated) {
    chosen = pick(sc.weights.data(), z, vocab, nullptr);
  } else if (!greedy) {
    const float* v = logits.data();
    RankDesc rank{v};
    std::vector<int32_t>& cand = sc.ids;
    // Each truncation keeps a prefix of the tokens in rank order; the shortest prefix wins.
    if (use_top_k && !use_min_p) {
      top_n(logits, params_.top_k, cand);
    } else if (use_min_p) {
      // min_p keeps p >= min_p * p_max, i.e. l >= l_max + log(min_p): one pass, no exp.
      const float min_l = max_l + static_cast<float>(std::log(params_.min_p));
      cand.clear();
      for (int32_t i = 0; i < vocab; ++i) {
        if (v[i] >= min_l) cand.push_back(i);
      }
      if (use_top_k && static_cast<int64_t>(cand.size()) > params_.top_k) {
        std::nth_element(cand.begin(), cand.begin() + params_.top_k, cand.end(), rank);
        cand.resize(static_cast<size_t>(params_.top_k));
      }
      std::sort(cand.begin(), cand.end(), rank);
    } else {
      nucleus_candidates(logits, max_l, sc.weights, params_.top_p * z, cand);
    }
    if (!need_z) {  // top-k / min-p only: weights of the candidates alone
      sc.weights.resize(static_cast<size_t>(vocab));
      for (int32_t id : cand) sc.weights[static_cast<size_t>(id)] = exp_nonpositive(v[id] - max_l);
    }
    float* w = sc.weights.data();
    if (use_top_p) {
      // The fewest best tokens whose mass (out of the full z) reaches top_p.
      const double target = params_.top_p * z;
      double mass = 0.0;
      size_t kept = 0;
      while (kept < cand.size() && (kept == 0 || mass < target)) mass += w[cand[kept++]];
      cand.resize(kept);
    }
    double total = 0.0;
    for (int32_t id : cand) total += w[id];
    chosen = pick(w, total, static_cast<int64_t>(cand.size()), cand.data());
  }

  if (logprob != nullptr && n_logprobs_ >= 0) {
    const double log_z = std::log(z) + max_l;
    logprob->token = chosen;
    logprob->logprob = static_cast<float>(logits[static_cast<size_t>(chosen)] - log_z);
    logprob->top.clear();
    if (n_logprobs_ > 0) {
      std::vector<int32_t> top;
      top_n(logits, n_logprobs_, top);
      for (int32_t id : top)
        logprob->top.emplace_back(id, static_cast<float>(logits[static_cast<size_t>(id)] - log_z));
    }
  }
  return chosen;
}

TokenLogprob score_token(std::span<const float> logits, int32_t token, int top) {
  KILN_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(),
             "scored token id {} is outside the vocabulary", token);
  const int32_t best = argmax_lowest(logits);  // also rejects NaN
  const float max_l = logits[static_cast<size_t>(best)];
  if (std::isinf(max_l)) fail("the model produced infinite logits");
  double z = 0.0;
  for (float l : logits) z += std::exp(static_cast<double>(l - max_l));
  const double log_z = std::log(z) + max_l;
  TokenLogprob lp;
  lp.token = token;
  lp.logprob = static_cast<float>(logits[static_cast<size_t>(token)] - log_z);
  if (top > 0) {
    std::vector<int32_t> ids;
    top_n(logits, top, ids);
    for (int32_t id : ids)
      lp.top.emplace_back(id, static_cast<float>(logits[static_cast<size_t>(id)] - log_z));
  }
  return lp;
}

}  // namespace kiln::engine
