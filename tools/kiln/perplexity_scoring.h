// Scoring for `kiln perplexity`: log-softmax of logits rows, the running negative
// log-likelihood with llama-perplexity's uncertainty, and the KL-divergence base file.
//
// The base file keeps, per scored position, the base model's top-K log-probabilities and the
// log of the mass outside them (a full row would be 1 MiB per position on a 262144-token
// vocabulary). KL(base || new) is then computed over those K tokens plus one bucket for the
// rest: grouping tokens never increases a KL divergence, so the figure is a lower bound of
// the full one, tight when the top K hold nearly all of the base's mass (the tail mass is
// printed so a reader can judge).
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::cli {

// log(sum(exp(row))) in double.
double log_sum_exp(const float* row, int64_t vocab);

// Negative log-likelihood over scored tokens; perplexity = exp(mean), its uncertainty as
// llama-perplexity states it: ppl * sqrt(var(nll) / (count - 1)).
class NllAccumulator {
 public:
  void add(double logprob);
  int64_t count() const { return count_; }
  double mean_nll() const { return count_ ? nll_ / static_cast<double>(count_) : 0.0; }
  double ppl() const;
  double ppl_error() const;

 private:
  double nll_ = 0, nll2_ = 0;
  int64_t count_ = 0;
};

struct KldHeader {
  int32_t n_ctx = 0;
  int32_t n_chunks = 0;
  int32_t top_k = 0;
  int32_t vocab = 0;
  std::vector<int32_t> tokens;  // the scored token stream: n_chunks * n_ctx ids
};

class KldBaseWriter {
 public:
  KldBaseWriter(const std::string& path, const KldHeader& header);
  // One scored position: the base's logits row and the token that follows.
  void add(const float* row, int32_t next_token);
  void close();

 private:
  std::ofstream out_;
  std::string path_;
  KldHeader header_;
};

// Mean KL divergence, top-1 agreement and both perplexities, as llama-perplexity prints them.
struct KldSummary {
  NllAccumulator q, base;
  std::vector<double> kld;  // per position
  int64_t same_top = 0;
  double tail_mass_sum = 0;  // base mass outside its top K, summed over positions
};

class KldComparer {
 public:
  // Throws kiln::Error when the file is not a base file, or was made from other tokens or
  // another context size than `expected`.
  KldComparer(const std::string& path, const KldHeader& expected);
  void add(const float* row, int32_t next_token);
  const KldSummary& summary() const { return summary_; }
  // llama-perplexity's statistics block, and a JSON line with the same figures.
  void print() const;

 private:
  std::ifstream in_;
  std::string path_;
  int32_t top_k_ = 0;
  int32_t vocab_ = 0;
  KldSummary summary_;
};

}  // namespace kiln::cli
