#include "kiln/engine/sampler.h"

#include <algorithm>
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
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Uniform double in [0, 1) from the top 53 bits: the same on every standard library (unlike
// std::uniform_real_distribution, whose algorithm is unspecified).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// "a ranks before b": higher value first, lower id among ties, so every selection below is
// deterministic.
struct RankDesc {
  const float* v;
  bool operator()(int32_t a, int32_t b) const { return v[a] > v[b] || (v[a] == v[b] && a < b); }
};

// Scratch reused across calls (one scheduler thread samples all requests): a candidate list
// can be as wide as the vocabulary, which is too big to allocate per token.
std::vector<int32_t>& scratch_ids() {
  thread_local std::vector<int32_t> ids;
  return ids;
}

// The n best ids of v (by RankDesc), best first: a bounded heap, O(V log n).
void top_n(std::span<const float> v, int64_t n, std::vector<std::pair<int32_t, float>>& out) {
  out.clear();
  n = std::min<int64_t>(n, static_cast<int64_t>(v.size()));
  if (n <= 0) return;
  RankDesc rank{v.data()};
  std::vector<int32_t> heap;  // heap top = the worst of the kept ids
  heap.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < static_cast<int32_t>(v.size()); ++i) {
    if (static_cast<int64_t>(heap.size()) < n) {
      heap.push_back(i);
      std::push_heap(heap.begin(), heap.end(), rank);
    } else if (rank(i, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), rank);
      heap.back() = i;
      std::push_heap(heap.begin(), heap.end(), rank);
    }
  }
  std::sort(heap.begin(), heap.end(), rank);
  for (int32_t i : heap) out.emplace_back(i, v[static_cast<size_t>(i)]);
}

// Inverse-CDF draw over weights exp(v[id] - max_l) of ids[0..n) (or 0..n when ids is null).
// `fallback` (the most likely token) covers the rounding case where the scan ends short of u.
int32_t draw(std::mt19937_64& rng, const float* v, float max_l, double total, int64_t n,
             const int32_t* ids, int32_t fallback) {
  const double u = uniform01(rng) * total;
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = ids ? ids[i] : static_cast<int32_t>(i);
    const double w = std::exp(v[id] - max_l);
    if (w == 0.0) continue;  // banned (-inf) or underflowed: never chosen
    acc += w;
    if (acc > u) return id;
  }
  return fallback;
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
  return params_.is_greedy() && n_logprobs_ < 0 && !penalties_active();
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
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> banned,
                        TokenLogprob* logprob) {
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

  // Softmax normalizer of the whole (processed) distribution, when anything needs it.
  const bool need_z = n_logprobs_ >= 0 || (!greedy && params_.top_p < 1.0);
  double z = 0.0;
  if (need_z) {
    for (float l : logits) z += std::exp(l - max_l);
  }

  int32_t chosen = best;
  if (!greedy) {
    const bool use_top_k = params_.top_k > 0 && params_.top_k < vocab;
    const bool use_min_p = params_.min_p > 0.0;
    const bool use_top_p = params_.top_p < 1.0;
    const float* v = logits.data();
    if (!use_top_k && !use_min_p && !use_top_p) {
      // No truncation: draw from the whole vocabulary.
      double total = z;
      if (!need_z) {
        for (float l : logits) total += std::exp(l - max_l);
      }
      chosen = draw(rng_, v, max_l, total, vocab, nullptr, best);
    } else {
      RankDesc rank{v};
      std::vector<int32_t>& cand = scratch_ids();
      cand.clear();
      // min_p keeps p >= min_p * p_max, i.e. l >= l_max + log(min_p): one pass, no exp.
      const float min_l = use_min_p ? max_l + static_cast<float>(std::log(params_.min_p)) : kNegInf;
      if (use_top_k && !use_min_p) {
        std::vector<std::pair<int32_t, float>> top;
        top_n(logits, params_.top_k, top);
        for (const auto& [id, l] : top) cand.push_back(id);
      } else {
        for (int32_t i = 0; i < vocab; ++i) {
          if (v[i] >= min_l) cand.push_back(i);
        }
        if (use_top_k && static_cast<int64_t>(cand.size()) > params_.top_k) {
          std::nth_element(cand.begin(), cand.begin() + params_.top_k, cand.end(), rank);
          cand.resize(static_cast<size_t>(params_.top_k));
        }
      }
      if (use_top_p) {
        // Keep the fewest best tokens whose mass (out of the full z) reaches top_p. Sort the
        // candidates only as far as needed: the sorted prefix widens geometrically.
        const double target = params_.top_p * z;
        double mass = 0.0;
        size_t kept = 0, sorted = 0, want = 64;
        const size_t n = cand.size();
        while (kept < n && (kept == 0 || mass < target)) {
          if (kept == sorted) {
            const size_t next = std::min(n, std::max(want, sorted + 1));
            if (next < n) {
              std::nth_element(cand.begin() + static_cast<ptrdiff_t>(sorted),
                               cand.begin() + static_cast<ptrdiff_t>(next), cand.end(), rank);
            }
            std::sort(cand.begin() + static_cast<ptrdiff_t>(sorted),
                      cand.begin() + static_cast<ptrdiff_t>(next), rank);
            sorted = next;
            want *= 8;
          }
          mass += std::exp(v[cand[kept]] - max_l);
          ++kept;
        }
        cand.resize(kept);
      }
      double total = 0.0;
      for (int32_t id : cand) total += std::exp(v[id] - max_l);
      chosen = draw(rng_, v, max_l, total, static_cast<int64_t>(cand.size()), cand.data(), best);
    }
  }

  if (logprob != nullptr && n_logprobs_ >= 0) {
    const double log_z = std::log(z) + max_l;
    logprob->token = chosen;
    logprob->logprob = static_cast<float>(logits[static_cast<size_t>(chosen)] - log_z);
    logprob->top.clear();
    if (n_logprobs_ > 0) {
      std::vector<std::pair<int32_t, float>> top;
      top_n(logits, n_logprobs_, top);
      for (const auto& [id, l] : top) logprob->top.emplace_back(id, static_cast<float>(l - log_z));
    }
  }
  return chosen;
}

}  // namespace kiln::engine
